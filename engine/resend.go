package engine

import (
	"context"
	"fmt"
	"sync"
)

// PossibleDuplicateHeader marks a copy sent again because the first one
// was in doubt (in flight when the connection was lost): it carries the
// same message_id and x-dlqbot-copy as the copy that may already have
// arrived, so a consumer that sees both drops the second.
const PossibleDuplicateHeader = "x-dlqbot-possible-duplicate"

// ResumeResend resumes a paused or stopped replay whose ledger holds
// copies in doubt, and asks its next run to send those copies again first
// (resume resend=in-doubt): each again at least once, with its message_id,
// the x-dlqbot-copy of the copy that may have arrived and
// PossibleDuplicateHeader. A replay in another state, or with nothing in
// doubt, is ErrNotControllable and nothing changes.
func (s *Service) ResumeResend(ctx context.Context, id, by string) (Replay, error) {
	r, err := s.d.Replays.Get(ctx, id)
	if err != nil {
		return Replay{}, fmt.Errorf("engine: resume %s resend=in-doubt: %w", id, err)
	}
	if r.State != StatePaused && r.State != StateStopped {
		return r, fmt.Errorf("engine: resume %s resend=in-doubt: %w: it is %s (a paused or stopped replay can resend; pause it first)", id, ErrNotControllable, r.State)
	}
	_, pending, err := s.ledgerCounts(ctx, id, nil)
	if err != nil {
		return r, fmt.Errorf("engine: resume %s resend=in-doubt: ledger: %w", id, err)
	}
	if pending == 0 {
		return r, fmt.Errorf("engine: resume %s resend=in-doubt: %w: no copy of it is in doubt", id, ErrNotControllable)
	}
	err = s.d.Replays.UpdateUnowned(ctx, id, func(cur *Replay) error {
		if cur.State != StatePaused && cur.State != StateStopped {
			return fmt.Errorf("%w: it is %s", ErrNotControllable, cur.State)
		}
		cur.ResendInDoubt = true
		return nil
	})
	if err != nil {
		// A held lease: a worker is still letting go of it; nothing changed.
		return r, fmt.Errorf("engine: resume %s resend=in-doubt: %w", id, err)
	}
	return s.Resume(ctx, id, by)
}

// pendingEntries are the ledger's copies in doubt: intents never
// confirmed nor withdrawn.
func pendingEntries(entries []LedgerEntry) []LedgerEntry {
	var out []LedgerEntry
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
	queue []LedgerEntry
	out   map[string][]LedgerEntry // id → entries picked for this step, not yet found
	n     int                      // copies named, for entries that recorded no x-dlqbot-copy
	// byCopy is read by the mover's recorder while the pass adds to it.
	mu     sync.Mutex
	byCopy map[string]LedgerEntry
}

func newResender(pending []LedgerEntry) *resender {
	return &resender{queue: pending, byCopy: map[string]LedgerEntry{}}
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
func (rs *resender) next(n int) map[string]int {
	pick := map[string]int{}
	rs.out = map[string][]LedgerEntry{}
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
func (rs *resender) take(id, runID string) (LedgerEntry, bool) {
	es := rs.out[id]
	if len(es) == 0 {
		return LedgerEntry{}, false
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
func (rs *resender) entry(m Moved) (LedgerEntry, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	e, ok := rs.byCopy[m.Copy]
	return e, ok
}

// giveBack returns entries to the queue for a later step: their copy was
// not published, or their original was not found in this step.
func (rs *resender) giveBack(es ...LedgerEntry) {
	rs.queue = append(rs.queue, es...)
}

// endStep gives back what the step did not find (held elsewhere), or,
// when gone is set (a whole read between quiet moments did not find them),
// returns them as gone for the caller to report.
func (rs *resender) endStep(gone bool) []LedgerEntry {
	var rest []LedgerEntry
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
func (rn *run) resendAfterLoss(ctx context.Context) error {
	pending, err := rn.s.pendingLedger(ctx, rn.r.ID)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	rn.r.InDoubt = len(pending)
	if len(pending) == 0 {
		return nil
	}
	rn.rs = newResender(pending)
	rn.r.ResendInDoubt = true
	rn.emit(ctx, EventWaiting, nil, fmt.Sprintf("%d copy(ies) were in flight when the connection was lost (in doubt): sending them again first, marked %s: true", len(pending), PossibleDuplicateHeader))
	return nil
}
