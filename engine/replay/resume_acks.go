package replay

import (
	"context"
	"fmt"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
	"strings"
	"time"
)

// A lost connection can leave originals in the DLQ whose copies the
// broker confirmed and the ledger holds as sent (Replay.Duplicates): their
// acks were never carried. A later run completes those acks. Whenever one
// of its reads of the DLQ meets such an original (an id all of whose
// previewed originals have a confirmed copy, not a copy of this replay,
// not dead-lettered since the replay began), the read acks it without
// sending anything (Pick.Drop); it is never sent again. Before the run
// ends it reads the rest of the DLQ for those it has not met yet
// (finishAcks), and a replay finishes only when the DLQ holds none of
// them: an original it could not reach (held by another client, a read
// budget too low) is said, and the replay stops instead.

// loadConfirmed reads, while the replay counts duplicates, each id's
// confirmed copies from the ledger: the originals the run may ack without
// sending. (A replay without duplicates keeps no such map.)
func (rn *run) loadConfirmed(ctx context.Context) error {
	rn.confirmed = nil
	if rn.r.Duplicates == 0 && !rn.r.Unreconciled {
		return nil
	}
	confirmed, pending := map[string]int{}, map[string]int{}
	err := rn.s.base.EachLedgerPage(ctx, rn.r.ID, func(page []engine.LedgerEntry) error {
		for _, e := range page {
			if e.Pending {
				pending[e.ID]++
			} else {
				confirmed[e.ID]++
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("engine: run %s: ledger: %w", rn.r.ID, err)
	}
	rn.confirmed, rn.pendingBy = confirmed, pending
	return nil
}

// dropping reports whether the run's reads ack originals of confirmed
// copies: while the replay counts duplicates.
func (rn *run) dropping() bool {
	return rn.r.Duplicates > 0 && len(rn.confirmed) > 0
}

// dropsOriginal reports whether m, met by a read of the DLQ, is the
// original of a copy the ledger holds as confirmed, to be acked without a
// copy; it counts it as dropped.
func (rn *run) dropsOriginal(m letter.Meta) bool {
	c := rn.confirmed[m.ID]
	if c == 0 || m.ReplayID == rn.r.ID || c < rn.plan.Previewed(m.ID) || rn.droppedIDs[m.ID] >= c || engine.DiedAfterSecondOf(m, rn.r.CreatedAt) {
		return false
	}
	if rn.droppedIDs == nil {
		rn.droppedIDs = map[string]int{}
	}
	rn.droppedIDs[m.ID]++
	return true
}

// bookDrops counts the originals a read dropped: no longer duplicates.
func (rn *run) bookDrops(mr engine.MoveResult) {
	n := len(mr.Dropped)
	if n == 0 {
		return
	}
	rn.bp.removed += n // they left the DLQ
	rn.r.Duplicates = max(0, rn.r.Duplicates-n)
	rn.r.DuplicatesAcked += n
}

// finishAcks, once the plan is exhausted, reads the DLQ for the originals
// of confirmed copies no step met, acks them, and counts what it could not
// (a whole read sets Duplicates exactly: the originals of confirmed copies
// still in the DLQ).
func (rn *run) finishAcks(ctx context.Context) {
	if rn.r.Duplicates == 0 {
		return
	}
	rn.releaseCursor("the acks a lost connection did not carry")
	// The ledger as it is now: this run's resends confirmed intents that
	// were in doubt when it began.
	if err := rn.loadConfirmed(ctx); err != nil {
		rn.Warn("ack the originals of confirmed copies", err)
		rn.dropNote = "the ledger could not be read"
		return
	}
	// The read is dlqbot's own, to other replays, and seeks: a replay
	// whose step holds messages of the DLQ gives way (giveway.go). A read
	// such a replay cut short is made again, until giveWayWait has passed.
	mark := rn.markScan(ctx)
	defer mark.end(ctx)
	mark.seek(ctx)
	deadline := rn.s.d.Clock.Now().Add(rn.giveWayWait())
	for {
		again, ok := rn.ackRead(ctx)
		if !again || !ok || !rn.s.d.Clock.Now().Before(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-rn.s.d.Clock.After(rn.s.cfg.SettlePoll):
		}
	}
}

// ackRead is one read of finishAcks. again is set when another dlqbot
// replay's read held messages of the DLQ meanwhile (named in
// rn.dropNote); ok is false when the read could not be made.
func (rn *run) ackRead(ctx context.Context) (again, ok bool) {
	st, err := rn.inspectDLQ(ctx)
	if err != nil {
		rn.Warn("ack the originals of confirmed copies", err)
		rn.dropNote = "the DLQ could not be inspected: " + err.Error()
		return false, false
	}
	if !st.Exists {
		rn.dropNote = "the DLQ no longer exists"
		return false, false
	}
	need := 1
	if rn.r.InDoubt > 0 {
		need++ // a resend of the copies in doubt reads the DLQ again
	}
	if berr := engine.BudgetError(st, need, ""); berr != nil {
		rn.dropNote = "a read of it could bring its messages nearer their delivery limit (" + berr.Error() + ")"
		return false, false
	}
	// Every original this read meets is in the DLQ now, whatever an
	// earlier read's drop did: up to the id's confirmed copies again.
	rn.droppedIDs = nil
	held := map[string]int{}
	mr, err := rn.s.d.Mover.Move(ctx, engine.MoveRequest{
		Queue: rn.r.DLQ,
		Pick: func(m letter.Message) (engine.Pick, bool) {
			meta := rn.s.base.ParseMeta(rn.r.DLQ, m)
			if rn.dropsOriginal(meta) {
				return engine.Pick{ID: meta.ID, Drop: true}, true
			}
			if meta.ReplayID != rn.r.ID && (rn.confirmed[meta.ID] > 0 || rn.pendingBy[meta.ID] > 0) {
				held[meta.ID]++
			}
			return engine.Pick{}, false
		},
		Continue: rn.mayContinue(ctx),
	})
	rn.bookDrops(mr)
	switch {
	case err != nil:
		rn.Warn("ack the originals of confirmed copies", err)
		rn.dropNote = "the read that acks them failed: " + err.Error()
		return false, false
	case mr.Coverage.Whole():
		// A whole read counts as reconcile's does (reconcile.go).
		rn.r.Duplicates = heldTwice(rn.plan, rn.confirmed, held)
		rn.r.InDoubtTaken = inDoubtTaken(rn.plan, rn.confirmed, rn.pendingBy, held)
		rn.r.Unreconciled, rn.r.CountStale = false, false
		rn.dropNote = ""
		return false, true
	}
	if rs := rn.replayReaders(ctx); len(rs) > 0 {
		rn.dropNote = "dlqbot replay " + strings.Join(rs, ", ") + " held messages of it (its own read, not another client)"
		return true, true
	}
	rn.dropNote = "another client held messages of it"
	return false, true
}

// inspectDLQ inspects the DLQ, again while the broker does not answer, up
// to Config.HeldWait: the acks are the last thing between a replay and
// "finished", and one slow answer must not leave them to a resume.
func (rn *run) inspectDLQ(ctx context.Context) (engine.QueueInfo, error) {
	deadline := rn.s.d.Clock.Now().Add(rn.s.cfg.HeldWait)
	for {
		st, err := rn.s.d.Broker.Inspect(ctx, rn.r.DLQ)
		if err == nil || ctx.Err() != nil || !rn.s.d.Clock.Now().Before(deadline) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, err
		case <-rn.s.d.Clock.After(time.Second):
		}
	}
}

// dupsNote words, for a replay that sent every copy, the originals of
// confirmed copies the DLQ still holds ("" when none): the replay does not
// finish on them.
func (rn *run) dupsNote() string {
	if rn.r.Duplicates == 0 {
		return ""
	}
	s := fmt.Sprintf("not finished: all %d sent, but %s still holds %d original(s) of copies delivered (a lost connection did not carry their acks)", rn.r.Sent, rn.r.DLQ, rn.r.Duplicates)
	if rn.dropNote != "" {
		s += "; they could not be acked: " + rn.dropNote
	}
	return s + "; a resume acks them (never sending them again)"
}
