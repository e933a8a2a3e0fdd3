package replay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
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
func (rc *recovery) loadConfirmed(ctx context.Context) error {
	rc.confirmed = nil
	if rc.rn.r.Duplicates == 0 && !rc.rn.r.Unreconciled {
		return nil
	}
	confirmed, pending := map[string]int{}, map[string]int{}
	err := rc.s.base.EachLedgerPage(ctx, rc.id, func(page []engine.LedgerEntry) error {
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
		return fmt.Errorf("engine: run %s: ledger: %w", rc.id, err)
	}
	rc.confirmed, rc.pendingBy = confirmed, pending
	return nil
}

// dropping reports whether the run's reads ack originals of confirmed
// copies: while the replay counts duplicates.
func (rc *recovery) dropping() bool {
	return rc.rn.r.Duplicates > 0 && len(rc.confirmed) > 0
}

// dropsOriginal reports whether m, met by a read of the DLQ, is the
// original of a copy the ledger holds as confirmed, to be acked without a
// copy; it counts it as dropped.
func (rc *recovery) dropsOriginal(m letter.Meta) bool {
	c := rc.confirmed[m.ID]
	if c == 0 || m.ReplayID == rc.id || c < rc.rn.plan.Previewed(m.ID) || rc.droppedIDs[m.ID] >= c || engine.DiedAfterSecondOf(m, rc.rn.r.CreatedAt) {
		return false
	}
	if rc.droppedIDs == nil {
		rc.droppedIDs = map[string]int{}
	}
	rc.droppedIDs[m.ID]++
	return true
}

// bookDrops counts the originals a read dropped: no longer duplicates.
func (rc *recovery) bookDrops(mr engine.MoveResult) {
	n := len(mr.Dropped)
	if n == 0 {
		return
	}
	rc.rn.ret.bp.removed += n // they left the DLQ
	rc.rn.r.Duplicates = max(0, rc.rn.r.Duplicates-n)
	rc.rn.r.DuplicatesAcked += n
}

// finishAcks, once the plan is exhausted, reads the DLQ for the originals
// of confirmed copies no step met, acks them, and counts what it could not
// (a whole read sets Duplicates exactly: the originals of confirmed copies
// still in the DLQ).
func (rc *recovery) finishAcks(ctx context.Context) {
	if rc.rn.r.Duplicates == 0 {
		return
	}
	rc.rn.releaseCursor("the acks a lost connection did not carry")
	// The ledger as it is now: this run's resends confirmed intents that
	// were in doubt when it began.
	if err := rc.loadConfirmed(ctx); err != nil {
		rc.s.base.Warn(rc.id, rc.dlq, "ack the originals of confirmed copies", err)
		rc.dropNote = "the ledger could not be read"
		return
	}
	// The read is dlqbot's own, to other replays, and seeks: a replay
	// whose step holds messages of the DLQ gives way (giveway.go). A read
	// such a replay cut short is made again, until giveWayWait has passed.
	mark := rc.rn.ret.markScan(ctx)
	defer mark.end(ctx)
	mark.seek(ctx)
	deadline := rc.s.d.Clock.Now().Add(rc.rn.own.giveWayWait())
	for {
		again, ok := rc.ackRead(ctx)
		if !again || !ok || !rc.s.d.Clock.Now().Before(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-rc.s.d.Clock.After(rc.s.cfg.SettlePoll):
		}
	}
}

// ackRead is one read of finishAcks. again is set when another dlqbot
// replay's read held messages of the DLQ meanwhile (named in
// rn.dropNote); ok is false when the read could not be made.
func (rc *recovery) ackRead(ctx context.Context) (again, ok bool) {
	st, err := rc.inspectDLQ(ctx)
	if err != nil {
		rc.s.base.Warn(rc.id, rc.dlq, "ack the originals of confirmed copies", err)
		rc.dropNote = "the DLQ could not be inspected: " + err.Error()
		return false, false
	}
	if !st.Exists {
		rc.dropNote = "the DLQ no longer exists"
		return false, false
	}
	need := 1
	if rc.rn.r.InDoubt > 0 {
		need++ // a resend of the copies in doubt reads the DLQ again
	}
	if berr := engine.BudgetError(st, need, ""); berr != nil {
		rc.dropNote = "a read of it could bring its messages nearer their delivery limit (" + berr.Error() + ")"
		return false, false
	}
	// Every original this read meets is in the DLQ now, whatever an
	// earlier read's drop did: up to the id's confirmed copies again.
	rc.droppedIDs = nil
	held := map[string]int{}
	mr, err := rc.s.d.Mover.Move(ctx, engine.MoveRequest{
		Queue: rc.dlq,
		Pick: func(m letter.Message) (engine.Pick, bool) {
			meta := rc.s.base.ParseMeta(rc.dlq, m)
			if rc.dropsOriginal(meta) {
				return engine.Pick{ID: meta.ID, Drop: true}, true
			}
			if meta.ReplayID != rc.id && (rc.confirmed[meta.ID] > 0 || rc.pendingBy[meta.ID] > 0) {
				held[meta.ID]++
			}
			return engine.Pick{}, false
		},
		Continue: rc.rn.jd.mayContinue(ctx),
	})
	rc.bookDrops(mr)
	switch {
	case err != nil:
		rc.s.base.Warn(rc.id, rc.dlq, "ack the originals of confirmed copies", err)
		rc.dropNote = "the read that acks them failed: " + err.Error()
		return false, false
	case mr.Coverage.Whole():
		// A whole read counts as reconcile's does (reconcile.go).
		rc.rn.r.Duplicates = heldTwice(rc.rn.plan, rc.confirmed, held)
		rc.rn.r.InDoubtTaken = inDoubtTaken(rc.rn.plan, rc.confirmed, rc.pendingBy, held)
		rc.rn.r.Unreconciled, rc.rn.r.CountStale = false, false
		rc.dropNote = ""
		return false, true
	}
	if rs := rc.rn.ret.replayReaders(ctx); len(rs) > 0 {
		rc.dropNote = "dlqbot replay " + strings.Join(rs, ", ") + " held messages of it (its own read, not another client)"
		return true, true
	}
	rc.dropNote = "another client held messages of it"
	return false, true
}

// inspectDLQ inspects the DLQ, again while the broker does not answer, up
// to Config.Tune.HeldWait: the acks are the last thing between a replay and
// "finished", and one slow answer must not leave them to a resume.
func (rc *recovery) inspectDLQ(ctx context.Context) (engine.QueueInfo, error) {
	deadline := rc.s.d.Clock.Now().Add(rc.s.cfg.Tune.HeldWait)
	for {
		st, err := rc.s.d.Broker.Inspect(ctx, rc.dlq)
		if err == nil || ctx.Err() != nil || !rc.s.d.Clock.Now().Before(deadline) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, err
		case <-rc.s.d.Clock.After(time.Second):
		}
	}
}

// dupsNote words, for a replay that sent every copy, the originals of
// confirmed copies the DLQ still holds ("" when none): the replay does not
// finish on them.
func (rc *recovery) dupsNote() string {
	if rc.rn.r.Duplicates == 0 {
		return ""
	}
	s := fmt.Sprintf("not finished: all %d sent, but %s still holds %d original(s) of copies delivered (a lost connection did not carry their acks)", rc.rn.r.Sent, rc.dlq, rc.rn.r.Duplicates)
	if rc.dropNote != "" {
		s += "; they could not be acked: " + rc.dropNote
	}
	return s + "; a resume acks them (never sending them again)"
}
