package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/review"
)

// halt records why the run ended early. Pause and shutdown leave the replay
// paused (resumable); cancel ends it; a lost lease writes nothing — the
// fencing would refuse it, and the reaper reports the replay interrupted.
// again is true when the run must carry on instead: an operator resumed it
// after the owner decided to pause, before the pause was written.
func (rn *run) halt(parent context.Context, cause error) (r engine.Replay, again bool, err error) {
	rn.releaseCursor("the replay halted") // a paused or stopped replay holds nothing
	rn.jd.pending = nil                   // sent, never judged: kept for the next run, below
	rn.jd.keepUnjudged()
	if stopsHere(cause) && !rn.hb.lost.Load() {
		rn.markCount(parent) // before the 5 s for the record's write begin
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 5*time.Second)
	defer cancel()
	switch {
	case errors.Is(cause, engine.ErrLeaseLost) || rn.hb.lost.Load():
		return rn.r, false, fmt.Errorf("engine: run %s: %w", rn.r.ID, engine.ErrLeaseLost)
	case errors.Is(cause, engine.ErrCancelRequested):
		return rn.haltCancelled(parent, ctx)
	case errors.Is(cause, engine.ErrPauseRequested):
		return rn.haltPaused(parent, ctx)
	case errors.Is(cause, engine.ErrReadBudget) || errors.Is(cause, engine.ErrBudgetUnknown):
		return rn.stopForBudget(parent, ctx, cause)
	case errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded):
		return rn.haltShutdown(parent, ctx)
	case errors.Is(cause, engine.ErrReturnsUnverified):
		return rn.jd.stopUnverified(parent, ctx, cause)
	case errors.Is(cause, engine.ErrManagementDown):
		return rn.jd.stopForAPI(parent, ctx, cause)
	default:
		return rn.stopForFault(parent, ctx, cause)
	}
}

// haltCancelled ends the replay cancelled, as an operator asked. ctx is
// halt's bounded context for the record's write, parent the run's.
func (rn *run) haltCancelled(parent, ctx context.Context) (engine.Replay, bool, error) {
	rn.actor = rn.ctl.actor()
	rn.r.State, rn.r.Note, rn.r.EndedAt = engine.StateCancelled, "cancelled by "+review.OrOperator(rn.actor), rn.s.d.Clock.Now()
	if err := rn.put(ctx); err != nil {
		return rn.r, false, err
	}
	rn.emit(ctx, engine.EventCancelled, nil, fmt.Sprintf("cancelled: %d sent, %d left in %s untouched", rn.r.Sent, rn.plan.Remaining(), rn.r.DLQ))
	// The copies already sent are still watched for their step's
	// grace: the cancelled record then counts what came back.
	if rn.jd.windDown(parent) {
		wctx, wcancel := context.WithTimeout(context.WithoutCancel(parent), 5*time.Second)
		defer wcancel()
		if err := rn.put(wctx); err != nil {
			return rn.r, false, err
		}
		rn.emit(wctx, engine.EventCancelled, nil, rn.jd.cancelledText())
	}
	return rn.r, false, nil
}

// haltPaused leaves the replay paused, as an operator asked, unless they
// resumed or cancelled it since (resumedMeanwhile).
func (rn *run) haltPaused(parent, ctx context.Context) (engine.Replay, bool, error) {
	rn.actor = rn.ctl.actor()
	rn.r.State, rn.r.Note = engine.StatePaused, "paused by "+review.OrOperator(rn.actor)
	err := rn.yield(ctx, engine.StatePaused, engine.StateRunning, engine.StateCancelled)
	if errors.Is(err, engine.ErrDesireChanged) {
		return rn.resumedMeanwhile(parent, ctx)
	}
	if err != nil {
		return rn.r, false, err
	}
	return rn.pausedNow(ctx)
}

// resumedMeanwhile acts on the desire that replaced a pause the run saw
// but could not write: a cancel halts the run, a resume carries it on
// (again), judging first the steps halt kept.
func (rn *run) resumedMeanwhile(parent, ctx context.Context) (engine.Replay, bool, error) {
	// Resumed or cancelled since the owner saw the pause: the
	// pause was never written; act on the new desire.
	rn.r.State, rn.r.Note, rn.actor = engine.StateRunning, "", ""
	rn.ctl.refresh(ctx)
	if rn.ctl.load() == engine.StatePaused {
		// The refresh failed; the store said the pause is gone.
		rn.ctl.desired.Store(engine.StateRunning)
	}
	if rn.ctl.load() == engine.StateCancelled {
		return rn.halt(parent, engine.ErrCancelRequested)
	}
	if parent.Err() != nil {
		return rn.halt(parent, parent.Err())
	}
	rn.jd.rejudge(parent) // the steps kept above are judged first
	return rn.r, true, nil
}

// haltShutdown leaves the replay paused when the process running it shuts
// down (its context ended), unless an operator cancelled it meanwhile.
func (rn *run) haltShutdown(parent, ctx context.Context) (engine.Replay, bool, error) {
	rn.r.State, rn.r.Note = engine.StatePaused, "paused: the process running it shut down; resume to continue"
	if r, yielded, err := rn.yieldOrCancel(parent, ctx, engine.StatePaused); !yielded {
		return r, false, err
	}
	return rn.pausedNow(ctx)
}

// pausedNow says that the run left the replay paused.
func (rn *run) pausedNow(ctx context.Context) (engine.Replay, bool, error) {
	rn.emit(ctx, engine.EventPaused, nil, fmt.Sprintf("paused: %d sent, %d left in %s untouched", rn.r.Sent, rn.plan.Remaining(), rn.r.DLQ))
	return rn.r, false, nil
}

// stopForBudget stops the replay, resumable, before a read the read
// budget forbids (or cannot tell).
func (rn *run) stopForBudget(parent, ctx context.Context, cause error) (engine.Replay, bool, error) {
	// Not a fault: the replay stopped before a read that could drop
	// messages, and resumes once the limit is raised (or, when the
	// budget could not be told, once the management API answers).
	note := "stopped by the read budget (" + cause.Error() + "); raise the delivery limit, then resume"
	var rbe *engine.ReadBudgetError
	var bue *engine.BudgetUnknownError
	switch {
	case errors.As(cause, &rbe):
		note = "stopped by the " + rbe.Error() + ", then resume"
	case errors.As(cause, &bue):
		note = "stopped: " + bue.Error() + "; resume once the management API answers"
	}
	// No follow-up checks: each would read the DLQ too.
	r, _, err := rn.stopYield(parent, ctx, note, nil, note)
	return r, false, err
}

// stopForFault stops the replay, resumable, on a fault (cause, which halt
// returns once the stop is written).
func (rn *run) stopForFault(parent, ctx context.Context, cause error) (engine.Replay, bool, error) {
	note := "stopped: " + cause.Error()
	r, stopped, err := rn.stopYield(parent, ctx, note, nil, note)
	if stopped {
		return r, false, cause
	}
	return r, false, err
}
