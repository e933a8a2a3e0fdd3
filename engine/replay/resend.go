package replay

import (
	"context"
	"fmt"
	"sync"

	"github.com/stroma/dlqbot/engine"
)

// pendingEntries are the ledger's copies in doubt: intents never
// confirmed nor withdrawn.
func pendingEntries(entries []engine.LedgerEntry) []engine.LedgerEntry {
	var out []engine.LedgerEntry
	for _, e := range entries {
		if e.Pending {
			out = append(out, e)
		}
	}
	return out
}

// resender is a run's resend of the copies in doubt, asked for with
// resume resend=in-doubt: the queue of ledger entries still to resend,
// those handed to the current step's pass, and each copy's entry by its
// x-dlqbot-copy.
type resender struct {
	queue []engine.LedgerEntry
	out   map[string][]engine.LedgerEntry // id → entries picked for this step, not yet found
	n     int                             // copies named, for entries that recorded no x-dlqbot-copy
	// byCopy is read by the mover's recorder while the pass adds to it.
	mu     sync.Mutex
	byCopy map[string]engine.LedgerEntry
}

func newResender(pending []engine.LedgerEntry) *resender {
	return &resender{queue: pending, byCopy: map[string]engine.LedgerEntry{}}
}

// left is how many copies in doubt are still to resend.
func (rs *resender) left() int {
	if rs == nil {
		return 0
	}
	n := len(rs.queue)
	for _, es := range rs.out {
		n += len(es)
	}
	return n
}

// next hands up to n entries to a step, as id → copies.
func (rs *resender) Next(n int) map[string]int {
	pick := map[string]int{}
	rs.out = map[string][]engine.LedgerEntry{}
	k := min(n, len(rs.queue))
	for _, e := range rs.queue[:k] {
		pick[e.ID]++
		rs.out[e.ID] = append(rs.out[e.ID], e)
	}
	rs.queue = rs.queue[k:]
	return pick
}

// take gives the pass the entry to resend for an original of id found in
// the DLQ: its copy keeps the entry's x-dlqbot-copy (a fresh one when the
// entry recorded none).
func (rs *resender) take(id, runID string) (engine.LedgerEntry, bool) {
	es := rs.out[id]
	if len(es) == 0 {
		return engine.LedgerEntry{}, false
	}
	e := es[0]
	rs.out[id] = es[1:]
	orig := e // as the ledger knows it (entry)
	if e.Copy == "" {
		rs.n++
		e.Copy = fmt.Sprintf("%s-resend-%d-%d", runID, e.Seq, rs.n)
	}
	rs.mu.Lock()
	rs.byCopy[e.Copy] = orig
	rs.mu.Unlock()
	return e, true
}

// entry is the ledger entry a resent copy stands for, as the ledger knows
// it (its original's seq and target), so that a confirm turns exactly
// that pending intent into a send.
func (rs *resender) entry(m engine.Moved) (engine.LedgerEntry, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	e, ok := rs.byCopy[m.Copy]
	return e, ok
}

// giveBack returns entries to the queue for a later step: their copy was
// not published, or their original was not found in this step.
func (rs *resender) giveBack(es ...engine.LedgerEntry) {
	rs.queue = append(rs.queue, es...)
}

// endStep gives back what the step did not find (held elsewhere), or,
// when gone is set (a whole read between quiet moments did not find them),
// returns them as gone for the caller to report.
func (rs *resender) endStep(gone bool) []engine.LedgerEntry {
	var rest []engine.LedgerEntry
	for _, es := range rs.out {
		rest = append(rest, es...)
	}
	rs.out = nil
	if gone {
		return rest
	}
	rs.giveBack(rest...)
	return nil
}

// resendAfterLoss, for a paced replay going on after a lost connection,
// queues every copy in doubt (the ledger's pending intents) to be sent
// again first, as resume resend=in-doubt does: same message_id and
// x-dlqbot-copy, marked PossibleDuplicateHeader. An unpaced replay stops
// instead and leaves that choice to a person.
func (rc *recovery) resendAfterLoss(ctx context.Context) error {
	pending, err := rc.s.pendingLedger(ctx, rc.id)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	rc.rn.r.InDoubt = len(pending)
	if len(pending) == 0 {
		return nil
	}
	rc.rs = newResender(pending)
	rc.rn.r.ResendInDoubt = true
	rc.rn.emit(ctx, engine.EventWaiting, nil, fmt.Sprintf("%d copy(ies) were in flight when the connection was lost (in doubt): sending them again first, marked %s: true", len(pending), engine.PossibleDuplicateHeader))
	return nil
}

// seekResend marks the run seeking while a step of its resend looks for
// the originals of its copies in doubt, as findRest marks a step looking
// for its picks: the resend reads the DLQ afresh, without a cursor and
// without claims of its own (its ids are its own sends already, which a
// claim keeps as sent), and its one-shot move holds every message it
// passes until it ends. So a preview, an approval's compare or a check
// beside it names this replay for what it holds (heldByReplays), another
// replay's step that finds its picks held waits for it and names it
// (heldBy, readerWait), never "another client", and a replay whose read
// holds the originals gives way (giveway.go, yieldCursor). The mark is
// kept by the pass (refreshSeek: a reader's once the read found all its
// picks) and by keepMarked between the pass's publishes; the returned
// end removes it.
func (rc *recovery) seekResend(ctx context.Context) (end func()) {
	rc.rn.own.seeking = true
	rc.rn.own.markReading(ctx, true)
	stop := rc.rn.own.keepMarked(ctx)
	return func() {
		stop()
		rc.rn.own.seeking = false
		rc.rn.own.doneReading(ctx)
	}
}
