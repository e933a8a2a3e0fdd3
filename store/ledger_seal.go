package store

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// An entry's MAC shows it changed or forged, not deleted: a record of a
// window removed from the log, an entry removed from a record, the log
// cut back, would read as copies never sent, and a resumed run would send
// them again. So, with a signing key, each record of the log and the log
// as a whole are sealed too:
//
//   - each record carries "s", 128 bits of the HMAC of the replay id, its
//     position in the log, its kind, time and DLQ, and the MACs of its
//     entries in order: a record deleted moves every later one from the
//     position its seal names, an entry deleted or replaced changes the
//     list its seal covers;
//   - the acks hash's "tally" field holds "<records> <MAC>": how many
//     records the log holds, under the replay id. A log shorter than its
//     tally lost its last records; a tally missing beside sealed records
//     was deleted.
//
// The record and the tally are written by the same script call, so they
// never disagree: Go computes both before the call, for the position it
// expects the record at, and the script writes nothing when the log's
// length is not that (another process wrote since; Go learns the length
// and computes them again). A window whose entries the DLQ's sent index
// refuses in part is written in two calls: the first marks and records
// nothing and names the refused ids, the second writes the rest.
//
// A check of a page reads the tally and the log's length in the page's
// round trip. A record without a seal is unsigned (refused unless
// Config.AcceptUnsigned). What the seal cannot show is the log and its
// tally rolled back together to an earlier state copied from Redis
// (records cut from the end and the tally they had): each process
// remembers the highest tally it read or wrote of each replay and
// refuses one lower, as it does with replay versions; a process that
// never saw the later tally trusts it. The log and its acks deleted
// together leave nothing to compare with.

// fieldTally is the acks hash's field with the log's signed record count.
const fieldTally = "tally"

// maxSealTries bounds the writes of one record that find the log's
// length other than expected.
const maxSealTries = 8

// record is the seal of a record at position pos of replayID's log, with
// entries' MACs macs (base64url, 22 characters).
func (m *ledgerMACer) record(replayID string, pos int64, kind string, at int64, dlq string, es []logEntry) string {
	m.field("ledger record")
	m.field(replayID)
	m.field(strconv.FormatInt(pos, 10))
	m.field(kind)
	m.field(strconv.FormatInt(at, 10))
	m.field(dlq)
	for _, e := range es {
		m.field(e.MAC)
	}
	return base64.RawURLEncoding.EncodeToString(m.mac())
}

// tally is the stored form of a tally of n records of replayID's log.
func (m *ledgerMACer) tally(replayID string, n int64) string {
	m.field("ledger tally")
	m.field(replayID)
	m.field(strconv.FormatInt(n, 10))
	return strconv.FormatInt(n, 10) + " " + base64.RawURLEncoding.EncodeToString(m.mac())
}

// tails remembers where this process expects each replay's next record:
// the log's length after its last write or read. A wrong guess costs a
// script call that writes nothing and answers the length.
type tails struct {
	mu sync.Mutex
	m  map[string]int64
}

// get is where replayID's next record is expected (0 when unknown).
func (t *tails) get(replayID string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[replayID]
}

// set remembers that replayID's log holds n records.
func (t *tails) set(replayID string, n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil || len(t.m) >= maxHighWater {
		t.m = map[string]int64{}
	}
	t.m[replayID] = n
}

// checkTally checks a log's tally (raw: the acks field, "" for none)
// against the log's length n, read after it; sealed says whether a
// record read carries a seal.
func (c *ledgerCheck) checkTally(raw string, n int64, sealed bool, start int64) error {
	if c.m == nil {
		if raw != "" {
			return c.b.refuse("ledger", c.replayID, "its ledger is signed, but this dlqbot has no signing key (DLQBOT_SIGNING_KEY) to check it")
		}
		return nil
	}
	if raw == "" {
		if sealed {
			return c.b.refuse("ledger", c.replayID, "its ledger's tally is missing beside sealed records (deleted in Redis)")
		}
		return nil
	}
	cnt, _, ok := strings.Cut(raw, " ")
	t, err := strconv.ParseInt(cnt, 10, 64)
	if !ok || err != nil || subtle.ConstantTimeCompare([]byte(raw), []byte(c.m.tally(c.replayID, t))) != 1 {
		return c.b.refuse("ledger", c.replayID, "its ledger's tally does not match its MAC (changed in Redis, or signed with another key)")
	}
	if n < t {
		return c.b.refuse("ledger", c.replayID, fmt.Sprintf(
			"its ledger holds %d records but its tally counts %d (records deleted in Redis); the ledger cannot be trusted", n, t))
	}
	if seen, ok := c.b.tallies.check(c.replayID, t, start); !ok {
		return c.b.refuseAs(ErrRecordRolledBack, "ledger", c.replayID, fmt.Sprintf(
			"its ledger's tally counts %d records, fewer than the %d read before (records deleted and an older tally written back in Redis)", t, seen))
	}
	return nil
}

// seal checks the seal of rec, read at position pos of the log.
func (c *ledgerCheck) seal(rec *logRec, pos int64) error {
	if rec.Seal == "" {
		if c.m == nil {
			return nil
		}
		return c.b.unsigned("ledger", c.replayID)
	}
	return c.mac(rec.Seal, func() string { return c.m.record(c.replayID, pos, rec.Kind, rec.At, rec.DLQ, rec.Entries) },
		"a record (at position "+strconv.FormatInt(pos, 10)+", a record before it deleted, or its entries changed)")
}

// tallyRead adds to pipe the reads a check of the tally needs: the acks
// field, then the log's length (after it, so that a record appended in
// between makes the log longer, never shorter, than its tally).
func (l *Ledger) tallyRead(ctx context.Context, pipe redis.Pipeliner, replayID string) (tally *redis.StringCmd, n *redis.IntCmd) {
	tally = pipe.HGet(ctx, l.b.k.acks(replayID), fieldTally)
	n = pipe.LLen(ctx, l.b.k.ledger(replayID))
	return tally, n
}
