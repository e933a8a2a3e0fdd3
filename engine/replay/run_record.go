package replay

import (
	"context"
	"errors"
	"fmt"

	"github.com/stroma/dlqbot/engine"
)

// maxFailures caps the failures kept in a replay record; counts stay exact.
const maxFailures = 200

// yield is the run's last write when it leaves the replay resumable
// (paused, stopped): the record, the desired state (so that only a new
// resume makes a worker run it again) and the lease's release in one
// step, refused with ErrDesireChanged when an operator asked since for
// one of the states unless.
func (rn *run) yield(ctx context.Context, desired engine.State, unless ...engine.State) error {
	rn.r.UpdatedAt = rn.s.d.Clock.Now()
	if err := rn.s.d.Replays.Yield(ctx, rn.r, rn.owner, rn.epoch, desired, unless...); err != nil {
		if errors.Is(err, engine.ErrLeaseLost) {
			rn.hb.lost.Store(true)
		} else if rn.hb.lost.Load() && !errors.Is(err, engine.ErrDesireChanged) {
			err = engine.ErrLeaseLost // the run was cancelled for it (see put)
		}
		if errors.Is(err, engine.ErrDesireChanged) {
			return err
		}
		return fmt.Errorf("engine: run %s: save: %w", rn.r.ID, err)
	}
	rn.hb.yielded.Store(true)
	return nil
}

// put writes the record, fenced by the lease.
func (rn *run) put(ctx context.Context) error {
	rn.r.UpdatedAt = rn.s.d.Clock.Now()
	if v, ok := rn.pace.Load().(string); ok {
		rn.r.Pace = v
	}
	if err := rn.s.d.Replays.Put(ctx, rn.r, rn.owner, rn.epoch); err != nil {
		if errors.Is(err, engine.ErrLeaseLost) {
			rn.hb.lost.Store(true)
		} else if rn.hb.lost.Load() {
			// The heartbeat found the lease gone and cancelled the run:
			// the write failed for that (a cancelled context), not for
			// the store.
			err = engine.ErrLeaseLost
		}
		return fmt.Errorf("engine: run %s: save: %w", rn.r.ID, err)
	}
	return nil
}

// emit tells the Notifier, when there is one, of an event of kind about
// the replay (and step, when not nil) as the run sees it now.
func (rn *run) emit(ctx context.Context, kind engine.EventKind, step *engine.StepResult, text string) {
	if rn.s.d.Notifier == nil {
		return
	}
	// Notifiers get copies: the run goes on changing its own step and record.
	if step != nil {
		c := *step
		step = &c
	}
	r := rn.r
	r.Failures = append([]engine.Failure(nil), rn.r.Failures...)
	rn.s.d.Notifier.Notify(ctx, engine.Event{Kind: kind, Replay: r, Step: step, Text: text, At: rn.s.d.Clock.Now(), Actor: rn.actor})
}

// fail lists f in the record, up to maxFailures.
func (rn *run) fail(f engine.Failure) {
	if len(rn.r.Failures) < maxFailures {
		rn.r.Failures = append(rn.r.Failures, f)
	}
}

// warn logs a failure the run carries on after, with its replay and DLQ.
func (rn *run) Warn(op string, err error) { rn.s.base.Warn(rn.r.ID, rn.r.DLQ, op, err) }

// forgetRetried withdraws, when a replay is resumed, what earlier runs
// counted as missing or not delivered: those copies are planned again (the
// ledger does not name them), and this run counts each one once, by what
// happens to it now. So missing + not delivered never count a copy twice
// and never exceed what is left to send.
func forgetRetried(r *engine.Replay) {
	r.Missing, r.Failed, r.Elsewhere = 0, 0, 0
	kept := r.Failures[:0]
	for _, f := range r.Failures {
		if !f.Kind.NotSent() {
			kept = append(kept, f)
		}
	}
	r.Failures = kept
}
