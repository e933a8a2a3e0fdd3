package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// The acks hash's layout field, and its values.
const (
	fieldLayout = "layout"
	// layoutWindows: every record of the log is a window's intents, and
	// every confirm and abandon a compact record: the log reads in pages.
	layoutWindows = "2"
	// layoutMixed: the log also holds confirm or abandon records (written
	// as earlier releases did), which may concern any earlier intent: it
	// is read whole. A log without the field was written by an earlier
	// release, and is read the same way.
	layoutMixed = "mixed"
)

// pageRecords is how many log records a page reads: windows of at most a
// few hundred copies each, so a page holds some thousands of entries.
const pageRecords = 32

// wholeChunk is how many log records one LRANGE of a whole read asks for.
const wholeChunk = 1000

// EntriesPage returns the page of replayID's entries starting at from;
// see engine.Ledger. A page is up to pageRecords windows, with the status
// of each copy from the acks fields those windows name: two round trips.
// A log not in the window layout (written by an earlier release, or with
// confirms of copies that had no tag) is returned whole, as one page.
func (l *Ledger) EntriesPage(ctx context.Context, replayID string, from int64) ([]engine.LedgerEntry, int64, error) {
	if err := checkTag("replay id", replayID); err != nil {
		return nil, -1, fmt.Errorf("store: ledger entries: %w", err)
	}
	if from < 0 {
		return nil, -1, nil
	}
	start := l.b.tallies.start()
	pipe := l.b.rdb.Pipeline()
	layout := pipe.HGet(ctx, l.b.k.acks(replayID), fieldLayout)
	tally, n := l.tallyRead(ctx, pipe, replayID)
	recs := pipe.LRange(ctx, l.b.k.ledger(replayID), from, from+pageRecords-1)
	if err := execPipe(ctx, pipe); err != nil {
		return nil, -1, fail(err, "ledger entries %s", replayID)
	}
	check := l.b.checkLedger(replayID)
	if layout.Val() != layoutWindows {
		if from > 0 || len(recs.Val()) == 0 {
			// A log deleted whole leaves its tally.
			return nil, -1, check.checkTally(tally.Val(), n.Val(), false, start)
		}
		out, err := l.whole(ctx, check)
		return out, -1, err
	}
	page, sealed, err := l.windows(ctx, check, from, recs.Val())
	if err == nil {
		err = check.checkTally(tally.Val(), n.Val(), sealed, start)
	}
	if err != nil {
		return nil, -1, err
	}
	next := from + int64(len(recs.Val()))
	if len(recs.Val()) < pageRecords {
		next = -1
	}
	return page, next, nil
}

// Entries returns everything replayID recorded, in send order: every page
// of EntriesPage. It is for tools and tests; the engine reads pages.
func (l *Ledger) Entries(ctx context.Context, replayID string) ([]engine.LedgerEntry, error) {
	var out []engine.LedgerEntry
	for from := int64(0); from >= 0; {
		page, next, err := l.EntriesPage(ctx, replayID, from)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		from = next
	}
	return out, nil
}

// windows turns a page of window records, the first at position from of
// the log, into entries: pending, unless the acks say confirmed (At then
// the confirm's time) or abandoned (left out). sealed says whether a
// record carries a seal.
func (l *Ledger) windows(ctx context.Context, check *ledgerCheck, from int64, raw []string) (_ []engine.LedgerEntry, sealed bool, _ error) {
	replayID := check.replayID
	recs := make([]logRec, len(raw))
	var fields []string
	seen := map[string]bool{}
	n := 0
	for i, r := range raw {
		if err := json.Unmarshal([]byte(r), &recs[i]); err != nil {
			return nil, false, fmt.Errorf("store: ledger entries %s: decode: %w", replayID, err)
		}
		if recs[i].Kind != "i" {
			// The window layout holds intents only (a confirm record here
			// was added in Redis, or the layout field changed).
			return nil, false, l.b.refuse("ledger", replayID, "its ledger is in the window layout but holds a record of kind "+strconv.Quote(recs[i].Kind))
		}
		if err := check.entries(&recs[i]); err != nil {
			return nil, false, err
		}
		if err := check.seal(&recs[i], from+int64(i)); err != nil {
			return nil, false, err
		}
		sealed = sealed || recs[i].Seal != ""
		for _, le := range recs[i].Entries {
			n++
			if prefix, c, ok := parseCopy(le.Copy); ok && !seen[ackField(prefix, c)] {
				seen[ackField(prefix, c)] = true
				fields = append(fields, ackField(prefix, c))
			}
		}
	}
	segs := map[string][]ackSeg{}
	if len(fields) > 0 {
		vals, err := l.b.rdb.HMGet(ctx, l.b.k.acks(replayID), fields...).Result()
		if err != nil {
			return nil, false, fail(err, "ledger entries %s: acks", replayID)
		}
		for i, v := range vals {
			if s, ok := v.(string); ok {
				if segs[fields[i]], err = check.acks(fields[i], s); err != nil {
					return nil, false, err
				}
			}
		}
	}
	out := make([]engine.LedgerEntry, 0, n)
	for _, rec := range recs {
		at := time.UnixMilli(rec.At).UTC()
		for _, le := range rec.Entries {
			e := engine.LedgerEntry{ReplayID: replayID, DLQ: rec.DLQ, ID: le.ID, Target: le.Target, Seq: le.Seq, At: at, Pending: rec.Kind == "i", Copy: le.Copy}
			if prefix, c, ok := parseCopy(le.Copy); ok && e.Pending {
				switch kind, cat := ackOf(segs[ackField(prefix, c)], c); kind {
				case 'a':
					continue
				case 'c':
					e.Pending, e.At = false, cat
				}
			}
			out = append(out, e)
		}
	}
	return out, sealed, nil
}

// whole reads a log not in the window layout, as earlier releases did: a
// confirm turns the replay's oldest matching pending intent (same id,
// target and seq) into a confirmed send, one without an intent is a
// confirmed send at the end, and an abandon drops the oldest matching
// intent. Compact acks, written since, then settle the intents still
// pending whose copy they name (each copy tag once).
func (l *Ledger) whole(ctx context.Context, check *ledgerCheck) ([]engine.LedgerEntry, error) {
	replayID := check.replayID
	key := l.b.k.ledger(replayID)
	start := l.b.tallies.start()
	pipe := l.b.rdb.Pipeline()
	tally, length := l.tallyRead(ctx, pipe, replayID)
	if err := execPipe(ctx, pipe); err != nil {
		return nil, fail(err, "ledger entries %s", replayID)
	}
	sealed := false
	type match struct {
		id, target string
		seq        int
	}
	var out []engine.LedgerEntry
	pending := map[match][]int{} // indexes in out of unconfirmed intents
	for from := int64(0); ; from += wholeChunk {
		raw, err := l.b.rdb.LRange(ctx, key, from, from+wholeChunk-1).Result()
		if err != nil {
			return nil, fail(err, "ledger entries %s", replayID)
		}
		for i, r := range raw {
			var rec logRec
			if err := json.Unmarshal([]byte(r), &rec); err != nil {
				return nil, fmt.Errorf("store: ledger entries %s: decode: %w", replayID, err)
			}
			if err := check.entries(&rec); err != nil {
				return nil, err
			}
			if err := check.seal(&rec, from+int64(i)); err != nil {
				return nil, err
			}
			sealed = sealed || rec.Seal != ""
			at := time.UnixMilli(rec.At).UTC()
			for _, le := range rec.Entries {
				e := engine.LedgerEntry{ReplayID: replayID, DLQ: rec.DLQ, ID: le.ID, Target: le.Target, Seq: le.Seq, At: at, Copy: le.Copy}
				m := match{le.ID, le.Target, le.Seq}
				switch rec.Kind {
				case "i":
					e.Pending = true
					out = append(out, e)
					pending[m] = append(pending[m], len(out)-1)
				case "a":
					if q := pending[m]; len(q) > 0 {
						out[q[0]].ID = "" // dropped below: that copy was never sent
						pending[m] = q[1:]
					}
				default:
					if q := pending[m]; len(q) > 0 {
						out[q[0]].Pending = false
						out[q[0]].At = at
						if le.Copy != "" {
							out[q[0]].Copy = le.Copy
						}
						pending[m] = q[1:]
						continue
					}
					out = append(out, e)
				}
			}
		}
		if len(raw) < wholeChunk {
			break
		}
	}
	if err := check.checkTally(tally.Val(), length.Val(), sealed, start); err != nil {
		return nil, err
	}
	if err := l.settleCompact(ctx, check, out); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(out, func(e engine.LedgerEntry) bool { return e.ID == "" }), nil
}

// settleCompact applies the compact acks of replayID to the pending
// entries of out (a whole read): the first pending entry of each copy tag
// they confirm or abandon.
func (l *Ledger) settleCompact(ctx context.Context, check *ledgerCheck, out []engine.LedgerEntry) error {
	replayID := check.replayID
	all, err := l.b.rdb.HGetAll(ctx, l.b.k.acks(replayID)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fail(err, "ledger entries %s: acks", replayID)
	}
	if len(all) <= 1 {
		return nil // at most the layout
	}
	segs := map[string][]ackSeg{}
	used := map[string]bool{}
	for i := range out {
		e := &out[i]
		prefix, c, ok := parseCopy(e.Copy)
		if !ok || !e.Pending || e.ID == "" || used[e.Copy] {
			continue
		}
		f := ackField(prefix, c)
		if _, done := segs[f]; !done {
			if segs[f], err = check.acks(f, all[f]); err != nil {
				return err
			}
		}
		switch kind, at := ackOf(segs[f], c); kind {
		case 'a':
			e.ID = ""
			used[e.Copy] = true
		case 'c':
			e.Pending, e.At = false, at
			used[e.Copy] = true
		}
	}
	return nil
}
