package store

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A DLQ's sent index (Psent:<dlq>) says which replays sent each message:
// a preview shows those as already replayed, and a window refuses them
// (ledger_window.go). It is merged inside the window scripts, in Redis,
// so each part is written there; with a signing key Go gives each id of
// a window the MAC of the part it gets, "<replay>:<ms>:<copies>:<MAC>":
// 128 bits of an HMAC of the message id under a key derived from the
// signing key, the DLQ, the replay and the time (sentMACer), so that a
// part cannot be forged, moved to another id, replay or DLQ, or made
// older. The copies are not covered (the script adds them
// up; they only say how many copies a replay sent).
//
// Deletions are seen through the index's field count: an id that loses
// its last part keeps the field ("-"), so the count never falls while the
// index lives, and after each window Go writes the count the script
// returned as a signed floor (Psentfloor:<dlq>, returns_floor.go's
// format and checks: never lowered, tainted when a window finds the count
// below it). A read (History) refuses, as a SignatureError of kind "sent
// index", a part without a MAC or whose MAC fails, and an index whose
// field count is below its floor, missing before it could have expired,
// or without a floor.
//
// What the index cannot show: a part deleted from an id that keeps
// another part (the field stays), and the index and its floor deleted
// or written back together (each process remembers the highest count it
// saw, as with the taps' counts). The window scripts read the index as
// Redis holds it — Lua has no key to check a MAC with — so a part
// deleted or edited lets a window through before a read has refused it.

// kindSent is the kind of the sent index's refusals and floors.
const kindSent = "sent index"

// sentMACLen is the length of a part's MAC (base64url of 16 bytes).
const sentMACLen = 22

// sentMACer computes the MACs of the marks one replay writes at one time
// in a DLQ's index: an HMAC under a key derived from the signing key, the
// DLQ, the replay and the time (one HMAC per window), over each message
// id, so that a window of 500 ids costs 500 short HMACs.
type sentMACer struct {
	h   hash.Hash
	buf []byte
	sum []byte
}

// sentMACer returns the MAC computer of replayID's marks at ms in dlq's
// index, or nil when the store has no key.
func (b *base) sentMACer(dlq, replayID string, ms int64) *sentMACer {
	m := b.ledgerMACer()
	if m == nil {
		return nil
	}
	m.field("sent index")
	m.field(dlq)
	m.field(replayID)
	m.field(strconv.FormatInt(ms, 10))
	m.h.Reset()
	m.h.Write(m.buf)
	return &sentMACer{h: hmac.New(sha256.New, m.h.Sum(nil))}
}

// appendMAC appends the MAC of id's mark to dst (base64url, 22
// characters).
func (s *sentMACer) appendMAC(dst []byte, id string) []byte {
	s.h.Reset()
	s.buf = append(s.buf[:0], id...)
	s.h.Write(s.buf)
	s.sum = s.h.Sum(s.sum[:0])
	return base64.RawURLEncoding.AppendEncode(dst, s.sum[:16])
}

// appendMarks appends to args (a window script's first ten) ARGV[11]
// and the entries of pairs (message id, entry): with a key "1" and each
// entry with the MAC of its id's mark, else "" and the pairs.
func (b *base) appendMarks(args []any, dlq, replayID string, ms int64, pairs []any) []any {
	s := b.sentMACer(dlq, replayID, ms)
	if s == nil {
		return append(append(args, ""), pairs...)
	}
	args = append(args, "1")
	// The MACs in one string, each entry's a slice of it: one allocation.
	buf := make([]byte, 0, sentMACLen*len(pairs)/2)
	at := make([]int, len(pairs)/2)
	last := ""
	for i := 0; i < len(pairs); i += 2 {
		id := pairs[i].(string)
		if i == 0 || id != last {
			buf = s.appendMAC(buf, id)
			last = id
		}
		at[i/2] = len(buf) - sentMACLen
	}
	macs := string(buf)
	for i := 0; i < len(pairs); i += 2 {
		args = append(args, pairs[i], pairs[i+1], macs[at[i/2]:at[i/2]+sentMACLen])
	}
	return args
}

// sentCheck checks the parts of one read of a DLQ's index.
type sentCheck struct {
	b   *base
	dlq string
	ms  map[string]*sentMACer // by "<replay>:<ms>"
	buf []byte
}

// part checks the MAC of every part of index value v of message id.
func (c *sentCheck) part(id, v string) error {
	for _, part := range strings.Split(v, ",") {
		if part == "-" || part == "" {
			continue
		}
		f := strings.Split(part, ":")
		if len(f) < 4 {
			if err := c.b.unsigned(kindSent, c.dlq); err != nil {
				return err
			}
			continue
		}
		ms, err := strconv.ParseInt(f[1], 10, 64)
		if err == nil {
			k := f[0] + ":" + f[1]
			s := c.ms[k]
			if s == nil {
				s = c.b.sentMACer(c.dlq, f[0], ms)
				c.ms[k] = s
			}
			c.buf = s.appendMAC(c.buf[:0], id)
		}
		if err != nil || subtle.ConstantTimeCompare([]byte(f[3]), c.buf) != 1 {
			return c.b.refuse(kindSent, c.dlq, "the record of which replays sent "+strconv.Quote(id)+" does not match its MAC (changed or moved in Redis, or signed with another key)")
		}
	}
	return nil
}

// sentFloorRead adds to pipe what a check of dlq's index count needs:
// its floor, then its field count and time to live.
func (l *Ledger) sentFloorRead(ctx context.Context, pipe redis.Pipeliner, dlq string) (fl *redis.StringCmd, n *redis.IntCmd, ttl *redis.DurationCmd) {
	fl = pipe.Get(ctx, l.b.k.sentFloor(dlq))
	n = pipe.HLen(ctx, l.b.k.sent(dlq))
	ttl = pipe.PTTL(ctx, l.b.k.sent(dlq))
	return fl, n, ttl
}

// raiseSentFloor writes or queues dlq's index floor after a window that
// took its field count from before to after, old being the floor read
// before it ("" for none). The index's first floor is written at once (a
// read meeting an index without one refuses it); later ones are queued
// for a pipeline of the ledger's at least sentFloorEvery later
// (flushSentFloors), so that a window costs no round trip more: the floor
// then lags the count by a second or so, as a count may be above its
// floor.
func (l *Ledger) raiseSentFloor(ctx context.Context, dlq string, before, after int64, old string, start int64) error {
	if len(l.b.cfg.SigningKey) == 0 || after < 0 {
		return nil
	}
	l.floors.mu.Lock()
	if l.floors.m == nil {
		l.floors.m = map[string]pendingFloor{}
	}
	p, queued := l.floors.m[dlq]
	if !queued {
		p = pendingFloor{before: before, old: old, start: start, since: l.b.now().UnixMilli()}
	}
	p.after = max(p.after, after)
	l.floors.m[dlq] = p
	l.floors.mu.Unlock()
	if old != "" {
		return nil
	}
	sp := l.b.pipeline()
	l.writeSentFloors(ctx, sp, true)
	return sp.Exec(ctx)
}

// queueZeroSentFloor queues in sp, before a write of dlq's index, a
// floor of nothing for it, which the floor script writes only where no
// floor counts more. So an index never exists without a floor, not even
// between a first window and its floor's write, nor after a process
// stopped between the two; a floor of nothing accepts any count, and no
// count (floorless reads are refused: checkFloor).
func (l *Ledger) queueZeroSentFloor(ctx context.Context, sp *scriptPipe, dlq string) {
	l.b.writeFloor(ctx, sp, l.b.k.sentFloor(dlq), kindSent, dlq,
		floor{tapCount: tapCount{exists: true, base: -1}, at: l.b.now().UnixMilli()})
}

// sentFloorEvery is how long an index floor waits for a pipeline at
// least: a replay's windows raise it about once a second, not once a
// window.
const sentFloorEvery = time.Second

// sentFloors are the index floors waiting for a pipeline, by DLQ.
type sentFloors struct {
	mu sync.Mutex
	m  map[string]pendingFloor
}

// pendingFloor is an index floor to write: the count before the first
// window since the last one written, the floor read then, and the count
// after the last.
type pendingFloor struct {
	before, after int64
	old           string
	start         int64
	since         int64 // unix ms when it was queued
}

// flushSentFloors queues in sp the write of the index floors pending for
// sentFloorEvery.
func (l *Ledger) flushSentFloors(ctx context.Context, sp *scriptPipe) {
	l.writeSentFloors(ctx, sp, false)
}

// writeSentFloors queues in sp the write of the pending index floors:
// all of them, or those pending for sentFloorEvery.
func (l *Ledger) writeSentFloors(ctx context.Context, sp *scriptPipe, all bool) {
	now := l.b.now()
	due := map[string]pendingFloor{}
	l.floors.mu.Lock()
	for dlq, p := range l.floors.m {
		if all || now.UnixMilli()-p.since >= sentFloorEvery.Milliseconds() {
			due[dlq] = p
			delete(l.floors.m, dlq)
		}
	}
	l.floors.mu.Unlock()
	if len(due) == 0 {
		return
	}
	m := due
	until := int64(0)
	if keep := l.b.cfg.retentionMs(); keep > 0 {
		until = now.UnixMilli() + keep
	}
	for dlq, p := range m {
		f := l.b.nextFloor(kindSent, dlq, tapCount{exists: p.before > 0, n: p.before, base: -1},
			tapCount{exists: true, n: p.after, base: -1}, p.old, p.start, now, until, true)
		l.b.writeFloor(ctx, sp, l.b.k.sentFloor(dlq), kindSent, dlq, f)
	}
}

// verifySentCount checks dlq's index field count n (ttl its time to live)
// against its floor raw and this process's memory.
func (l *Ledger) verifySentCount(dlq string, n int64, ttl time.Duration, raw string, start int64) error {
	now := l.b.now()
	return l.b.verifyCount(kindSent, dlq, tapCount{exists: n > 0, n: n, base: -1}, raw, start, now, expiresAt(now, ttl))
}
