package replay

import (
	"context"
	"errors"
	"fmt"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
)

// After a lost broker connection a replay's counts can be short of what
// the broker holds. An ack written just before the loss may never reach
// the queue (AMQP 0-9-1 does not confirm acks, and on a cluster the node
// that carried it may die with it): its original comes back to the DLQ
// ready although its copy was confirmed at the target, so the broker holds
// that message twice while the replay counted it sent once. The mover
// reports as Unacked every original whose ack it cannot prove (an upper
// bound), so neither count alone is exact.
//
// So a replay that lost its connection reconciles: once the broker
// answers again and no client holds messages of the DLQ, a counted read
// (Broker.Scan, which changes nothing) finds, for each previewed id, how
// many originals the DLQ holds beyond those not yet confirmed at a target
// (never sent, or in doubt). Each of those is a duplicate: its copy was
// confirmed, and its original is still or again in the DLQ. The replay's
// Duplicates becomes that count, and InDoubt the ledger's pending intents,
// so that every copy the broker may hold twice is in exactly one of them.
// The originals of the duplicates are then acked by the run's reads as they
// meet them, never sent again (resume_acks.go): acking them loses nothing,
// their copies were confirmed.
//
// The read waits for a quiet DLQ for up to Config.Tune.HeldWait, marked seeking
// meanwhile, so that another dlqbot replay's step gives back what its read
// holds (giveway.go); when it cannot be made (the broker away, its read
// budget too low, other readers),
// Replay.Unreconciled stays set and the next run tries again before it
// sends anything.

// markLost notes that err lost the broker connection mid-step: the
// replay's counts are then unreconciled until a counted read of the DLQ.
// A management API that does not answer loses no connection.
func (rc *recovery) markLost(err error) {
	if errors.Is(err, engine.ErrBrokerUnavailable) && !errors.Is(err, engine.ErrManagementDown) {
		rc.rn.r.Unreconciled = true
	}
}

// reconcile, when the replay's counts are unreconciled, reads the DLQ at a
// quiet moment and sets Duplicates and InDoubt from what the broker holds
// (see above). ok is false when it could not (said in the record's note
// for a waiting run, and retried by the next run); err is a failure of the
// store.
func (rc *recovery) reconcile(ctx context.Context) (ok bool, err error) {
	if !rc.rn.r.Unreconciled {
		return true, nil
	}
	clock := rc.s.d.Clock
	deadline := clock.Now().Add(rc.s.cfg.Tune.HeldWait)
	stop := func() error { return rc.rn.stopCause(ctx) }
	// The wait and the read seek, to other replays: a replay whose step
	// holds messages of the DLQ gives them back (giveway.go) rather than
	// keep the DLQ from being quiet until its step ends.
	mark := rc.rn.ret.markScan(ctx)
	defer mark.end(ctx)
	mark.seek(ctx)
	for {
		since := clock.Now()
		quiet, qerr := rc.s.base.AwaitQuiet(ctx, rc.id, rc.dlq, since, deadline, true, stop)
		if qerr != nil || !quiet || stop() != nil {
			if qerr != nil {
				rc.s.base.Warn(rc.id, rc.dlq, "reconcile: wait for a quiet DLQ", qerr)
			}
			return false, nil
		}
		st, ierr := rc.s.d.Broker.Inspect(ctx, rc.dlq)
		if ierr != nil || !st.Exists {
			return false, nil
		}
		if berr := engine.BudgetError(st, 1+rc.readsStillNeeded(), ""); berr != nil {
			// The read could bring a message nearer its delivery limit
			// than the rest of the replay can afford: counted later.
			rc.s.base.Warn(rc.id, rc.dlq, "reconcile: read budget", berr)
			return false, nil
		}
		held := map[string]int{}
		info, serr := rc.s.d.Broker.Scan(ctx, rc.dlq, func(m letter.Message) error {
			meta := rc.s.base.ParseMeta(rc.dlq, m)
			if meta.ReplayID != rc.id { // a copy of this replay back in the DLQ is a return
				held[meta.ID]++
			}
			return nil
		})
		if serr != nil {
			rc.s.base.Warn(rc.id, rc.dlq, "reconcile: read the DLQ", serr)
			return false, nil
		}
		if !info.Coverage.Whole() {
			if clock.Now().After(deadline) {
				return false, nil
			}
			continue // another reader came and went: read again
		}
		confirmed, pendingBy := map[string]int{}, map[string]int{}
		_, pending, lerr := rc.s.base.LedgerCounts(ctx, rc.id, func(e engine.LedgerEntry) {
			if e.Pending {
				pendingBy[e.ID]++
			} else {
				confirmed[e.ID]++
			}
		})
		if lerr != nil {
			return false, fmt.Errorf("engine: run %s: reconcile: ledger: %w", rc.id, lerr)
		}
		dups := heldTwice(rc.rn.plan, confirmed, held)
		rc.rn.r.Duplicates, rc.rn.r.InDoubt = dups, pending
		rc.rn.r.InDoubtTaken = inDoubtTaken(rc.rn.plan, confirmed, pendingBy, held)
		rc.rn.r.Unreconciled, rc.rn.r.CountStale = false, false
		return true, nil
	}
}

// readsStillNeeded is how many reads of the DLQ the rest of the replay
// needs besides the reconcile itself (its budget is checked again before
// each step).
func (rc *recovery) readsStillNeeded() int {
	rereads := engine.RereadsPerStep
	if rc.rn.ret.mode == engine.ReturnsTap {
		rereads = 0
	}
	if rc.rn.toSend() == 0 {
		return 0
	}
	n, _ := engine.ReadsNeeded(rc.rn.plan.Remaining()+rc.rs.left(), rc.rn.r.Params, rereads)
	return n - 1
}

// heldTwice counts, from the preview's items, the replay's confirmed
// sends and the originals a whole read found in the DLQ (per id), the
// copies the broker holds twice: per id, the originals beyond those whose
// copies were never confirmed (items not sent plus pending intents).
func heldTwice(p *engine.Plan, confirmed map[string]int, inDLQ map[string]int) (dups int) {
	for id, c := range confirmed {
		unconfirmed := max(0, p.Previewed(id)-c)
		dups += min(c, max(0, inDLQ[id]-unconfirmed))
	}
	return dups
}

// inDoubtTaken counts the copies in doubt whose originals a whole read
// did not find in the DLQ: per id, the originals missing from those not
// confirmed at a target (not sent, or in doubt), up to its copies in
// doubt. dlqbot never acks the original of a copy in doubt, so something
// else took them.
func inDoubtTaken(p *engine.Plan, confirmed, pending, inDLQ map[string]int) (n int) {
	for id, k := range pending {
		unconfirmed := max(0, p.Previewed(id)-confirmed[id])
		n += min(k, max(0, unconfirmed-inDLQ[id]))
	}
	return n
}

// cutStep is a step a lost connection ended after some of its copies were
// confirmed: their settling is judged once the broker answers again, so
// that no sent copy goes unjudged and none in doubt is counted settled
// (only confirmed copies are in sentPer).
type cutStep struct {
	res      engine.StepResult
	sentPer  map[string]int
	publish0 map[string]int64
	look     *returnsLook
}

// keepCut keeps a step that a lost connection ended, to be settled after
// the reconnect (settleCut).
func (rc *recovery) keepCut(res engine.StepResult, sentPer map[string]int, publish0 map[string]int64, look *returnsLook) {
	rc.cut = nil
	if res.Sent == 0 || len(sentPer) == 0 {
		return
	}
	rc.cut = &cutStep{res: res, sentPer: sentPer, publish0: publish0, look: look}
}

// afterLoss runs once the broker may answer again after a lost connection:
// it settles the step the loss cut (adding what settled to the replay's
// Settled) and reconciles the counts with the DLQ. A copy of the cut step
// that came back is returned as an error naming it, so that the replay
// stops as after any step with returns.
func (rc *recovery) afterLoss(ctx context.Context) error {
	if c := rc.cut; c != nil {
		rc.cut = nil
		if _, err := rc.s.d.Broker.Inspect(ctx, rc.dlq); err == nil {
			p := rc.rn.jd.beginSettle(ctx, c.res, c.sentPer, c.publish0, c.look)
			stop, serr := rc.rn.jd.settleSteps(ctx, p, nil)
			c.res = p.res
			rc.rn.jd.noteSettled(p)
			if stop == nil && serr == nil && c.res.Returned > 0 {
				return fmt.Errorf("step %d, cut by the lost connection, settled after the reconnect: %s", c.res.Step, c.res.Observation)
			}
		}
	}
	if _, err := rc.reconcile(ctx); err != nil {
		return err
	}
	return rc.loadConfirmed(ctx)
}

// lossNote words, for a replay stopped by a lost connection, what is
// left: sent, in doubt and duplicates as last counted, and what a resume
// does.
func (rc *recovery) lossNote() string {
	s := fmt.Sprintf("%d of %d sent", rc.rn.r.Sent, rc.rn.r.Total)
	if rc.rn.r.Duplicates > 0 {
		s += fmt.Sprintf(", %d duplicate(s) (delivered, their originals also in %s%s)", rc.rn.r.Duplicates, rc.dlq, engine.LastCount(rc.rn.r))
	}
	if rc.rn.r.InDoubt > 0 {
		s += fmt.Sprintf(", %d in doubt (maybe delivered; resume with resend=in-doubt sends them again, marked %s: true)", rc.rn.r.InDoubt, engine.PossibleDuplicateHeader)
	}
	if rest := rc.rn.plan.Remaining(); rest > 0 {
		s += fmt.Sprintf("; a resume sends the %d not sent yet", rest)
	}
	if rc.rn.r.Unreconciled {
		s += fmt.Sprintf("; duplicates not yet counted against %s (the next run reads it first)", rc.dlq)
	}
	return s
}
