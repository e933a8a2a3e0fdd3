package replay

import (
	"context"
	"fmt"

	"github.com/stroma/dlqbot/engine"
)

// loop runs the replay: it readies the run (prepare), writes it running
// (begin), sends its steps (steps), judges the copies still unsettled and
// ends it (end). Whatever halts it on the way returns what halt did.
func (rn *run) loop(parent context.Context) (engine.Replay, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	defer rn.releaseCursor("the run ended")
	defer rn.s.rev.DropKept(rn.r.ID) // a read its approval kept and no step took
	go rn.hb.run(ctx, cancel)
	rn.ctl.refresh(ctx)
	go rn.ctl.watch(ctx)

	kind := rn.startKind()
	if r, ended, err := rn.prepare(parent, ctx, kind); ended {
		return r, err
	}
	defer rn.ret.watchTap(ctx)() // the tap's loss is noticed at once, and repaired
	if r, ended, err := rn.begin(parent, ctx, kind); ended {
		return r, err
	}
	if r, ended, err := rn.Steps(parent, ctx); ended {
		return r, err
	}
	rn.rec.finishAcks(ctx)
	if r, ended, err := rn.settleLast(parent, ctx); ended {
		return r, err
	}
	return rn.end(ctx)
}

// startKind is the event a run begins with: resumed for a paused or
// stopped replay, started for a new one.
func (rn *run) startKind() engine.EventKind {
	if rn.r.State == engine.StatePaused || rn.r.State == engine.StateStopped {
		return engine.EventResumed
	}
	return engine.EventStarted
}

// prepare acts on a pause or cancel asked for already, names who resumed
// the replay (kind: started or resumed) and puts the means of finding
// returns in place (startReturns) before anything is sent. ended is true
// when the run halted here: r and err are then its outcome.
func (rn *run) prepare(parent, ctx context.Context, kind engine.EventKind) (r engine.Replay, ended bool, err error) {
	if err := rn.ctl.err(); err != nil {
		if r, again, err := rn.halt(parent, err); !again {
			return r, true, err
		}
	}
	if kind == engine.EventResumed && rn.ctl.load() == engine.StateRunning {
		rn.actor = rn.ctl.actor()
	}
	// The tap goes in place before anything is published (a pause or
	// cancel meanwhile still acts within a second).
	sctx, scancel := context.WithCancel(ctx)
	go rn.jd.cancelOnStop(sctx, scancel)
	err = rn.ret.startReturns(sctx)
	scancel()
	if cause := rn.stopCause(ctx); cause != nil {
		if r, again, err := rn.halt(parent, cause); !again {
			return r, true, err
		}
	} else if err != nil {
		r, _, err := rn.halt(parent, err)
		return r, true, err
	}
	return rn.r, false, nil
}

// begin writes the replay running and says so (kind: started or resumed),
// then settles what an earlier run left: the counts after a lost
// connection, the acks it did not carry and the step it left unjudged.
// ended is true when the run ended here: r and err are then its outcome.
func (rn *run) begin(parent, ctx context.Context, kind engine.EventKind) (r engine.Replay, ended bool, err error) {
	rn.r.State, rn.r.Note = engine.StateRunning, ""
	if err := rn.put(ctx); err != nil {
		return rn.r, true, err
	}
	rn.emit(ctx, kind, nil, rn.startText(kind))
	rn.actor = ""
	rn.recount(ctx)
	if _, err := rn.rec.reconcile(ctx); err != nil { // after a lost connection (reconcile.go)
		r, _, err := rn.halt(parent, err)
		return r, true, err
	}
	if err := rn.rec.loadConfirmed(ctx); err != nil {
		r, _, err := rn.halt(parent, err)
		return r, true, err
	}
	rn.jd.rejudge(ctx) // the step the last run left unjudged, first
	return rn.r, false, nil
}

// startText words the start (kind: started or resumed) of the run.
func (rn *run) startText(kind engine.EventKind) string {
	text := fmt.Sprintf("replay %s of %d message(s) from %s %s", rn.r.ID, rn.r.Total, rn.r.DLQ, kind)
	if tw := engine.TakeOverWords(rn.r); tw != "" && kind == engine.EventStarted {
		text += "; " + tw // what its approval took over, and from whom
	}
	if rn.ret.mode == engine.ReturnsReread {
		text += "; returns will be found at the DLQ's tail by the replay's own read, or by re-reading the DLQ (" + rn.ret.modeNote + ")"
	}
	return text
}

// steps sends the run's steps until nothing is left to send and no step
// is left unjudged. ended is true when the run ended first (halted, or
// stopped after a step): r and err are then its outcome.
func (rn *run) Steps(parent, ctx context.Context) (r engine.Replay, ended bool, err error) {
	for rn.toSend() > 0 || rn.jd.pending != nil {
		res, err := rn.nextStep(ctx)
		if err != nil {
			if r, again, err := rn.halt(parent, err); !again {
				return r, true, err
			}
			continue
		}
		if res.Planned == 0 && res.Sent == 0 && rn.rec.rs.left() == 0 {
			continue // the rest was another replay's
		}
		if note := rn.stepNote(&res); note != "" {
			r, err := rn.stopAfter(parent, ctx, res, note)
			return r, true, err
		}
		rn.emit(ctx, engine.EventStepPassed, &res, fmt.Sprintf("step %d passed: %s", res.Step, res.Observation))
	}
	return rn.r, false, nil
}

// nextStep sends the next step and judges it (or the one before it,
// settle_overlap.go), unless sending must stop first (stopCause) or the
// read budget forbids the step (sendBudget); the error is then why, for
// halt.
func (rn *run) nextStep(ctx context.Context) (engine.StepResult, error) {
	if err := rn.stopCause(ctx); err != nil {
		return engine.StepResult{}, err
	}
	if err := rn.jd.sendBudget(ctx); err != nil {
		return engine.StepResult{}, err
	}
	res, stopErr, err := rn.step(ctx)
	if err == nil {
		err = stopErr
	}
	if err != nil {
		err = rn.rec.rejoin(ctx, err) // nil: a paced replay goes on after a lost node (reconnect.go)
	}
	return res, err
}

// stepNote is why the run stops after the step res judged ("": it goes
// on): copies that came back or did not settle, planned messages held by
// another client, or nothing of the step sent (which res's observation
// then says too).
func (rn *run) stepNote(res *engine.StepResult) string {
	note := ""
	switch {
	case res.Returned > 0 || (res.Sent > 0 && res.Settled == 0):
		note = res.Observation
	case res.HeldElsewhere > 0:
		note = rn.heldWhy(res.HeldElsewhere)
		if res.Sent > 0 {
			note += " (step: " + res.Observation + ")"
		}
	}
	if note == "" && res.Sent == 0 {
		// Nothing of the step reached a target: the replay did not
		// make progress, and "passed" would claim that it did.
		note = rn.nothingSent(*res)
		res.Observation = note
	}
	return note
}

// stopAfter stops the replay after step res for note (stopYield), and
// schedules its follow-up checks.
func (rn *run) stopAfter(parent, ctx context.Context, res engine.StepResult, note string) (engine.Replay, error) {
	rn.releaseCursor("the replay stopped")
	rn.markCount(ctx)
	r, stopped, err := rn.stopYield(parent, ctx, note, &res, "stopped after step "+fmt.Sprint(res.Step)+": "+note)
	if stopped {
		rn.s.scheduleFollowUps(ctx, rn.r)
	}
	return r, err
}

// settleLast judges the copies still unsettled once the plan is
// exhausted (settleRest), halting as often as it is stopped and carrying
// on when halt says so. ended is true when the run ended here.
func (rn *run) settleLast(parent, ctx context.Context) (r engine.Replay, ended bool, err error) {
	for {
		stop, err := rn.jd.settleRest(ctx)
		if err == nil {
			err = stop
		}
		if err == nil {
			return rn.r, false, nil
		}
		if r, again, err := rn.halt(parent, err); !again {
			return r, true, err
		}
	}
}

// toSend is how many copies the run has yet to send: the copies in doubt
// it resends and the plan's remaining picks.
func (rn *run) toSend() int { return rn.rec.rs.left() + rn.plan.Remaining() }
