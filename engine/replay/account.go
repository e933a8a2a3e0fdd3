package replay

import (
	"context"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
)

// A step accounts for every message it planned: pass books what a move
// over the DLQ did, and findRest (account_find.go) accounts for the picks
// it did not find.

// pass runs one Move over the DLQ for what is still to find in pick and
// books its outcome into res, sentPer and the plan.
func (rn *run) pass(ctx context.Context, pick map[string]int, left *int, res *engine.StepResult, sentPer map[string]int) (engine.MoveResult, error) {
	sentBefore := rn.r.Sent
	rn.lastProgress = time.Time{}
	rate, paceHook := rn.paceOf(ctx)
	rn.own.passPaced = rate > 0 || paceHook != nil // giveway.go
	sentItems := &sentItems{p: rn.plan}
	onSent := sentItems.Add
	if rn.rec.resending {
		onSent = nil // bookResend reads mr.Sent
	}
	mr, moveErr := rn.own.moveGivingWay(ctx, engine.MoveRequest{
		Queue:     rn.r.DLQ,
		Satisfied: func() bool { return *left == 0 },
		Rewrite: func(h map[string]any, p engine.Pick) map[string]any {
			out := letter.ReplayHeaders(h, rn.r.ID, p.Source, rn.s.cfg.Dialect.ResetHeaders()...)
			if rn.rec.resending {
				out[engine.PossibleDuplicateHeader] = true
			}
			return out
		},
		Window:   rn.s.cfg.Tune.Window,
		Rate:     rate,
		Pace:     paceHook,
		Continue: rn.own.continueGivingWay(ctx, left),
		Intend: func(ctx context.Context, batch []engine.Moved) (map[string]string, error) {
			if err := rn.hb.check(ctx); err != nil {
				return nil, err
			}
			// A resend's window is fenced only: the first copy's intent is
			// still pending.
			return rn.s.d.Ledger.IntendWindow(ctx, rn.window(batch))
		},
		Confirmed: func(ctx context.Context, batch []engine.Moved) error {
			if err := rn.s.d.Ledger.Confirm(ctx, rn.confirmations(batch)); err != nil {
				return err
			}
			rn.progress(ctx, len(batch))
			return nil
		},
		OnSent: onSent,
	}, rn.passPick(pick, left), pick, left)
	rn.r.Sent = sentBefore
	rn.stepMoves.Add(mr)
	rn.rec.bookDrops(mr)
	rn.refused(mr, res)
	if rn.rec.resending {
		rn.bookResend(mr, res, sentPer)
		return mr, rn.abandon(ctx, mr)
	}
	sent := rn.bookSent(sentItems, mr, sentPer)
	res.Sent += sent
	rn.r.Sent += sent
	rn.r.Duplicates += len(mr.Unacked)
	rn.bookFailed(mr, res, sentPer)
	if err := rn.abandon(ctx, mr); err != nil && moveErr == nil {
		moveErr = err
	}
	return mr, moveErr
}

// passPick is a pass's choice of each message it reads: an original
// whose copy an earlier run confirmed is dropped, one the step picked
// (pick, left) is sent to its target (a resend's to its first copy's),
// others are left where they are.
func (rn *run) passPick(pick map[string]int, left *int) metaPick {
	return func(_ letter.Message, metaOf func() letter.Meta) (engine.Pick, bool) {
		if rn.rec.dropping() {
			// An original whose copy an earlier run confirmed: its ack,
			// which a lost connection did not carry (resume_acks.go).
			if meta := metaOf(); rn.rec.dropsOriginal(meta) {
				return engine.Pick{ID: meta.ID, Drop: true}, true
			}
		}
		if *left == 0 {
			return engine.Pick{}, false
		}
		meta := metaOf()
		id := meta.ID
		if pick[id] == 0 {
			// A later step's: a cursor keeps it for that step.
			return engine.Pick{Later: !rn.rec.resending && rn.plan.LeftOf(id) > 0}, false
		}
		if rn.rec.resending {
			e, ok := rn.rec.rs.take(id, rn.r.ID)
			if !ok {
				return engine.Pick{}, false
			}
			pick[id]--
			*left--
			rn.pacedTarget(e.Target)
			return engine.Pick{ID: id, Target: e.Target, Source: meta.Source, Copy: e.Copy}, true
		}
		pick[id]--
		*left--
		rn.pacedTarget(rn.plan.Target(id))
		return engine.Pick{ID: id, Target: rn.plan.Target(id), Source: meta.Source}, true
	}
}

// bookFailed books the copies a pass could not send, or could not
// record as sent, each as a failure of the run.
func (rn *run) bookFailed(mr engine.MoveResult, res *engine.StepResult, sentPer map[string]int) {
	for _, f := range mr.Failed {
		rn.plan.Drop(f.ID, 1)
		if f.Kind == engine.MoveUnrecorded {
			// Confirmed by the broker, so delivered: its original stays in
			// the DLQ and its ledger intent stays pending (never sent
			// again). A duplicate, never "not delivered".
			res.Sent++
			rn.r.Sent++
			rn.r.Duplicates++
			sentPer[f.Target]++
			rn.fail(engine.Failure{ID: f.ID, Target: f.Target, Kind: f.Kind.Failure(), Detail: f.Detail})
			continue
		}
		res.Failed++
		if f.Kind == engine.MoveLost {
			// No confirm: maybe delivered, maybe not. Not "not delivered".
			rn.r.InDoubt++
		} else {
			rn.r.Failed++
		}
		rn.fail(engine.Failure{ID: f.ID, Target: f.Target, Kind: f.Kind.Failure(), Detail: f.Detail})
	}
}

// confirmations are the ledger entries a confirmed batch stands for: a
// resent copy confirms the pending intent of the copy in doubt it repeats.
func (rn *run) confirmations(batch []engine.Moved) []engine.LedgerEntry {
	out := rn.entries(batch, false)
	if !rn.rec.resending {
		return out
	}
	for i, m := range batch {
		if e, ok := rn.rec.rs.entry(m); ok {
			// The intent's own copy tag ("" for one written before copies
			// were named: the ledger then matches id, target and seq).
			out[i].Seq, out[i].Target, out[i].Copy = e.Seq, e.Target, e.Copy
		}
	}
	return out
}

// bookResend books a resend pass: a resent copy the broker confirmed is
// sent (once: its first copy never counted) and no longer in doubt, and a
// possible duplicate; one the broker did not confirm stays in doubt, its
// intent pending, and is never counted sent.
func (rn *run) bookResend(mr engine.MoveResult, res *engine.StepResult, sentPer map[string]int) {
	for _, m := range append(append([]engine.Moved(nil), mr.Sent...), mr.Unacked...) {
		sentPer[m.Target]++
		res.Sent++
		rn.r.Sent++
		rn.r.Resent++
		rn.r.InDoubt = max(0, rn.r.InDoubt-1)
	}
	rn.r.Duplicates += len(mr.Unacked)
	for _, f := range mr.Failed {
		res.Failed++
		detail := "sent again, but " + f.Detail + "; still in doubt"
		if f.Kind == engine.MoveUnrecorded {
			detail = "sent again and confirmed, but the ledger could not record it: " + f.Detail + "; still in doubt"
		}
		rn.fail(engine.Failure{ID: f.ID, Target: f.Target, Kind: engine.FailureInDoubt, Detail: detail})
	}
	if len(mr.Sent)+len(mr.Unacked) > 0 {
		rn.dropDoubtFailures(append(append([]engine.Moved(nil), mr.Sent...), mr.Unacked...))
	}
}

// dropDoubtFailures removes the in-doubt failures of copies now sent.
func (rn *run) dropDoubtFailures(sent []engine.Moved) {
	n := map[string]int{}
	for _, m := range sent {
		n[m.ID]++
	}
	kept := rn.r.Failures[:0]
	for _, f := range rn.r.Failures {
		if f.Kind == engine.FailureInDoubt && n[f.ID] > 0 {
			n[f.ID]--
			continue
		}
		kept = append(kept, f)
	}
	rn.r.Failures = kept
}
