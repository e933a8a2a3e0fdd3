package replay

import (
	"context"
	"errors"

	"github.com/stroma/dlqbot/engine"
)

// stopCause says why sending must stop now, if it must.
func (rn *run) stopCause(ctx context.Context) error {
	if err := rn.controlErr(); err != nil {
		return err
	}
	if rn.hb.lost.Load() {
		return engine.ErrLeaseLost
	}
	return ctx.Err()
}

// controlErr is the control's pause or cancel, but for a cancelled run
// watching the copies it sent (windDown): it has acted on the cancel.
func (rn *run) controlErr() error {
	if rn.jd.winding.Load() {
		return nil
	}
	return rn.ctl.err()
}

// stopsHere reports whether halt leaves the replay stopped for cause (a
// fault, the read budget), rather than cancelled, paused or abandoned.
func stopsHere(cause error) bool {
	for _, not := range []error{engine.ErrLeaseLost, engine.ErrCancelRequested, engine.ErrPauseRequested, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(cause, not) {
			return false
		}
	}
	return true
}

// stopYield leaves the replay stopped, resumable, for note: its end is
// written with the run's last write (yieldOrCancel), then EventStopped
// says so with step (may be nil) and text. stopped is true when it was
// written; otherwise r and err are what the run ends with: halt's, as
// cancelled, when an operator cancelled the replay meanwhile, or the
// failed write. The caller schedules follow-up checks, when it wants them.
// ctx bounds the writes; parent is the run's context, for halt.
func (rn *run) stopYield(parent, ctx context.Context, note string, step *engine.StepResult, text string) (r engine.Replay, stopped bool, err error) {
	rn.r.State = engine.StateStopped
	rn.r.Note = note
	rn.r.EndedAt = rn.s.d.Clock.Now()
	if r, yielded, err := rn.yieldOrCancel(parent, ctx, engine.StateStopped); !yielded {
		return r, false, err
	}
	rn.emit(ctx, engine.EventStopped, step, text)
	return rn.r, true, nil
}

// yieldOrCancel is the run's last write leaving the replay resumable in
// state desired (yield), refused when an operator cancelled it since: the
// run then halts as cancelled. yielded is true when the write was made;
// otherwise r and err are what the run ends with.
func (rn *run) yieldOrCancel(parent, ctx context.Context, desired engine.State) (r engine.Replay, yielded bool, err error) {
	if err := rn.yield(ctx, desired, engine.StateCancelled); errors.Is(err, engine.ErrDesireChanged) {
		rn.ctl.refresh(ctx) // cancelled since the run decided
		r, _, err := rn.halt(parent, engine.ErrCancelRequested)
		return r, false, err
	} else if err != nil {
		return rn.r, false, err
	}
	return rn.r, true, nil
}
