package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// maxFailures caps the failures kept in a replay record; counts stay exact.
const maxFailures = 200

// run is one owner's execution of one replay.
type run struct {
	s      *Service
	r      Replay
	f      Frozen
	owner  string
	epoch  int64
	plan   *plan
	target map[string]string
	hb     *heartbeat
	ctl    *control
	// returnedSeen are returned copies already counted, id → copies.
	returnedSeen map[string]int
	// lastProgress is when a step last wrote its progress.
	lastProgress time.Time
	// frozenIDs are the previewed ids (built on first use).
	frozenIDs map[string]bool
	// actor is who caused the event being emitted, when a person did.
	actor string
	// mode is how this run finds returns, and modeNote why it re-reads.
	mode     ReturnsMode
	modeNote string
	// tapTotal is the replay's returns recorded by the tap at the last
	// look; listed is how many returned events are in r.Failures.
	tapTotal int
	listed   int
}

// Run executes replay id as owner until it finishes, stops, pauses, is
// cancelled, loses its lease or ctx ends, and returns the record as it
// stood. It never re-sends what the ledger says was sent. Another process
// owning the replay is ErrReplayBusy.
func (s *Service) Run(ctx context.Context, id, owner string) (Replay, error) {
	if s.d.Replays == nil || s.d.Leases == nil || s.d.Mover == nil {
		return Replay{}, errors.New("engine: run: replays, leases and mover are required")
	}
	epoch, ok, err := s.d.Leases.Acquire(ctx, id, owner, s.cfg.LeaseTTL)
	if err != nil {
		return Replay{}, fmt.Errorf("engine: run %s: acquire lease: %w", id, err)
	}
	if !ok {
		return Replay{}, fmt.Errorf("engine: run %s: %w", id, ErrReplayBusy)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.d.Leases.Release(rctx, id, owner)
	}()
	r, err := s.d.Replays.Get(ctx, id)
	if err != nil {
		return Replay{}, fmt.Errorf("engine: run %s: %w", id, err)
	}
	if r.State.Terminal() {
		return r, nil
	}
	f, err := s.d.Tokens.Load(ctx, r.Token)
	if err != nil {
		return r, fmt.Errorf("engine: run %s: load preview: %w", id, err)
	}
	entries, err := s.d.Ledger.Entries(ctx, id)
	if err != nil {
		return r, fmt.Errorf("engine: run %s: ledger: %w", id, err)
	}
	// Confirmed sends are done; pending intents were in flight when an
	// earlier run ended abruptly: they may have been sent, so they are never
	// sent again (they stay in the DLQ and are reported in doubt).
	sent := map[string]int{}
	var doubt []LedgerEntry
	for _, e := range entries {
		sent[e.ID]++
		if e.Pending {
			doubt = append(doubt, e)
		}
	}
	rn := &run{
		s: s, r: r, f: f, owner: owner, epoch: epoch, plan: newPlan(f.Items, sent),
		hb:           &heartbeat{leases: s.d.Leases, id: id, owner: owner, ttl: s.cfg.LeaseTTL},
		ctl:          &control{replays: s.d.Replays, id: id, every: s.cfg.ControlPoll},
		returnedSeen: map[string]int{},
	}
	rn.target = rn.plan.targets()
	rn.noteDoubt(doubt)
	return rn.loop(ctx)
}

func (rn *run) loop(parent context.Context) (Replay, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	go rn.hb.run(ctx, cancel)
	rn.ctl.refresh(ctx)
	go rn.ctl.watch(ctx)

	kind := EventStarted
	if rn.r.State == StatePaused || rn.r.State == StateStopped {
		kind = EventResumed
	}
	if err := rn.ctl.err(); err != nil {
		return rn.halt(parent, err)
	}
	if kind == EventResumed && rn.ctl.load() == StateRunning {
		rn.actor = rn.ctl.actor()
	}
	// The tap goes in place before anything is published (a pause or
	// cancel meanwhile still acts within a second).
	sctx, scancel := context.WithCancel(ctx)
	go rn.cancelOnStop(sctx, scancel)
	err := rn.startReturns(sctx)
	scancel()
	if cause := rn.stopCause(ctx); cause != nil {
		return rn.halt(parent, cause)
	}
	if err != nil {
		return rn.halt(parent, err)
	}
	rn.r.State, rn.r.Note = StateRunning, ""
	if err := rn.put(ctx); err != nil {
		return rn.r, err
	}
	text := fmt.Sprintf("replay %s of %d message(s) from %s %s", rn.r.ID, rn.r.Total, rn.r.DLQ, kind)
	if rn.mode == ReturnsReread {
		text += "; returns will be found by re-reading the DLQ once per step (" + rn.modeNote + ")"
	}
	rn.emit(ctx, kind, nil, text)
	rn.actor = ""

	for rn.plan.remaining() > 0 {
		if err := rn.stopCause(ctx); err != nil {
			return rn.halt(parent, err)
		}
		res, stopErr, err := rn.step(ctx)
		if err != nil {
			return rn.halt(parent, err)
		}
		if stopErr != nil {
			return rn.halt(parent, stopErr)
		}
		if res.Sent == 0 {
			// Nothing of the step reached a target: the replay did not
			// make progress, and "passed" would claim that it did.
			res.Observation = rn.nothingSent(res)
		}
		if res.Returned > 0 || res.Sent == 0 || res.Settled == 0 {
			rn.r.State = StateStopped
			rn.r.Note = res.Observation
			rn.r.EndedAt = rn.s.d.Clock.Now()
			if err := rn.put(ctx); err != nil {
				return rn.r, err
			}
			rn.emit(ctx, EventStopped, &res, "stopped after step "+fmt.Sprint(res.Step)+": "+res.Observation)
			rn.s.scheduleFollowUps(ctx, rn.r)
			return rn.r, nil
		}
		rn.emit(ctx, EventStepPassed, &res, fmt.Sprintf("step %d passed: %s", res.Step, res.Observation))
	}
	rn.r.State = StateFinished
	rn.r.EndedAt = rn.s.d.Clock.Now()
	rn.r.Note = fmt.Sprintf("%d sent, %d settled, %d came back, %d missing, %d not delivered", rn.r.Sent, rn.r.Settled, rn.r.Returned, rn.r.Missing, rn.r.Failed)
	if err := rn.put(ctx); err != nil {
		return rn.r, err
	}
	rn.emit(ctx, EventFinished, nil, "finished: "+rn.r.Note)
	rn.s.scheduleFollowUps(ctx, rn.r)
	return rn.r, nil
}

// nothingSent words a step none of whose copies was sent.
func (rn *run) nothingSent(res StepResult) string {
	kinds := map[string]int{}
	for _, f := range rn.r.Failures {
		kinds[f.Kind]++
	}
	s := fmt.Sprintf("none of the %d message(s) of step %d was sent", res.Planned, res.Step)
	var why []string
	for _, k := range []string{"target_missing", "unroutable", "nacked", "refused", "missing", "in_doubt"} {
		if kinds[k] > 0 {
			why = append(why, fmt.Sprintf("%d %s", kinds[k], strings.ReplaceAll(k, "_", " ")))
		}
	}
	if len(why) > 0 {
		s += " (so far in this replay: " + strings.Join(why, ", ") + ")"
	}
	return s + "; the originals that could be kept are still in " + rn.r.DLQ
}

// stopCause says why sending must stop now, if it must.
func (rn *run) stopCause(ctx context.Context) error {
	if err := rn.ctl.err(); err != nil {
		return err
	}
	if rn.hb.lost.Load() {
		return ErrLeaseLost
	}
	return ctx.Err()
}

// halt records why the run ended early. Pause and shutdown leave the replay
// paused (resumable); cancel ends it; a lost lease writes nothing — the
// fencing would refuse it, and the reaper reports the replay interrupted.
func (rn *run) halt(parent context.Context, cause error) (Replay, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 5*time.Second)
	defer cancel()
	switch {
	case errors.Is(cause, ErrLeaseLost) || rn.hb.lost.Load():
		return rn.r, fmt.Errorf("engine: run %s: %w", rn.r.ID, ErrLeaseLost)
	case errors.Is(cause, ErrCancelRequested):
		rn.actor = rn.ctl.actor()
		rn.r.State, rn.r.Note, rn.r.EndedAt = StateCancelled, "cancelled by "+orOperator(rn.actor), rn.s.d.Clock.Now()
		if err := rn.put(ctx); err != nil {
			return rn.r, err
		}
		rn.emit(ctx, EventCancelled, nil, fmt.Sprintf("cancelled: %d sent, %d left in %s untouched", rn.r.Sent, rn.plan.remaining(), rn.r.DLQ))
		return rn.r, nil
	case errors.Is(cause, ErrPauseRequested):
		rn.actor = rn.ctl.actor()
		rn.r.State, rn.r.Note = StatePaused, "paused by "+orOperator(rn.actor)
	case errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded):
		rn.r.State, rn.r.Note = StatePaused, "paused: the process running it shut down; resume to continue"
	default:
		rn.r.State, rn.r.Note = StateStopped, "stopped: "+cause.Error()
		rn.r.EndedAt = rn.s.d.Clock.Now()
		if err := rn.put(ctx); err != nil {
			return rn.r, err
		}
		rn.emit(ctx, EventStopped, nil, rn.r.Note)
		return rn.r, cause
	}
	if err := rn.put(ctx); err != nil {
		return rn.r, err
	}
	rn.emit(ctx, EventPaused, nil, fmt.Sprintf("paused: %d sent, %d left in %s untouched", rn.r.Sent, rn.plan.remaining(), rn.r.DLQ))
	return rn.r, nil
}

// put writes the record, fenced by the lease.
func (rn *run) put(ctx context.Context) error {
	rn.r.UpdatedAt = rn.s.d.Clock.Now()
	if err := rn.s.d.Replays.Put(ctx, rn.r, rn.owner, rn.epoch); err != nil {
		if errors.Is(err, ErrLeaseLost) {
			rn.hb.lost.Store(true)
		}
		return fmt.Errorf("engine: run %s: save: %w", rn.r.ID, err)
	}
	return nil
}

func (rn *run) emit(ctx context.Context, kind EventKind, step *StepResult, text string) {
	if rn.s.d.Notifier == nil {
		return
	}
	// Notifiers get copies: the run goes on changing its own step and record.
	if step != nil {
		c := *step
		step = &c
	}
	r := rn.r
	r.Failures = append([]Failure(nil), rn.r.Failures...)
	rn.s.d.Notifier.Notify(ctx, Event{Kind: kind, Replay: r, Step: step, Text: text, At: rn.s.d.Clock.Now(), Actor: rn.actor})
}

func (rn *run) fail(f Failure) {
	if len(rn.r.Failures) < maxFailures {
		rn.r.Failures = append(rn.r.Failures, f)
	}
}

// noteDoubt records copies an earlier run may have sent (once each).
func (rn *run) noteDoubt(doubt []LedgerEntry) {
	known := map[string]bool{}
	for _, f := range rn.r.Failures {
		if f.Kind == "in_doubt" {
			known[f.ID] = true
		}
	}
	for _, e := range doubt {
		if !known[e.ID] {
			known[e.ID] = true
			rn.fail(Failure{ID: e.ID, Target: e.Target, Kind: "in_doubt",
				Detail: "in flight when an earlier run ended abruptly: it may have been delivered, so it is not sent again; its original stays in the DLQ"})
		}
	}
}

// orOperator names who acted, or "an operator" when unknown.
func orOperator(by string) string {
	if by == "" {
		return "an operator"
	}
	return by
}
