package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// maxFailures caps the failures kept in a replay record; counts stay exact.
const maxFailures = 200

// run is one owner's execution of one replay.
type run struct {
	s     *Service
	r     Replay
	f     Frozen
	owner string
	epoch int64
	plan  *plan
	hb    *heartbeat
	ctl   *control
	// returnedSeen are returned copies already counted, id → copies.
	returnedSeen map[string]int
	// lastProgress is when a step last wrote its progress.
	lastProgress time.Time
	// actor is who caused the event being emitted, when a person did.
	actor string
	// mode is how this run finds returns, and modeNote why it re-reads.
	mode     ReturnsMode
	modeNote string
	// tapTotal is the replay's returns recorded by the tap at the last
	// look; listed is how many returned events are in r.Failures.
	tapTotal int
	listed   int
	// watch follows the tap (tap_watch.go); gapExtra counts the returns
	// found by re-reading the DLQ after windows without the tap.
	watch    *tapWatch
	gapExtra int
	// rs resends the copies in doubt (resume resend=in-doubt); nil when
	// not asked for.
	rs *resender
	// resending is true during a step of rs.
	resending bool
	// claimed are the ids this step claimed (Deps.Claims), and stepSent
	// those it sent or may have sent.
	claimed  []string
	stepSent map[string]bool
	// heldNote names who held messages of the DLQ when the last step
	// found messages held elsewhere (heldBy); heldLanded says that step's
	// whole reads kept finding messages reach the DLQ that they had not
	// seen (findRest).
	heldNote   string
	heldLanded bool
	// sawReaders are the other dlqbot replays, and sawScans the dlqbot
	// previews, approvals and checks ("a preview of U123"), a step looking
	// for its picks (findRest) has seen reading the DLQ (readerWait),
	// while it looks: heldBy names them when they ended before it gave up.
	sawReaders, sawScans []string
	// curHeld is how many messages the cursor held at the last step's end,
	// for the run's reading mark (markReading).
	curHeld int
	// cut is the step a lost connection ended, settled after the
	// reconnect (reconcile.go).
	cut *cutStep
	// cur is the read of the DLQ the steps continue (nil: none open), and
	// curOpened when it opened (see cursor.go).
	cur       Cursor
	curOpened time.Time
	// marked is when the run last marked itself reading the DLQ (and
	// looked for replays seeking what its cursor holds, readers.go).
	marked time.Time
	// pending is the step sent and not judged yet while the next one
	// sends (settle_overlap.go), tripped the breaker's verdict on the step
	// sending beside it (settle_breaker.go), and proofs what the targets'
	// counters can prove (settle_proof.go).
	pending *sentStep
	tripped atomic.Bool
	proofs  map[string]*targetProof
	// bp is the baseline of the tap-bypass check (settle_bypass.go).
	bp bypassBase
	// apiDown counts the reads of management counters that failed
	// because the API is not answering, and apiMark is its value when the
	// step being sent sampled its targets (settle_api.go).
	apiDown atomic.Int64
	apiMark int64
	// open are the steps sent and not judged yet, by number; rest is what
	// judging the copies still unsettled when the plan was exhausted
	// found; winding is set while a cancelled run watches the copies it
	// sent (settle_unjudged.go).
	open    map[int]*sentStep
	rest    *StepResult
	winding atomic.Bool
	// confirmed and pendingBy are the ledger's confirmed copies and copies
	// in doubt per id, droppedIDs the originals of confirmed copies the
	// run acked without a copy, and dropNote why some could not be
	// (resume_acks.go).
	confirmed  map[string]int
	pendingBy  map[string]int
	droppedIDs map[string]int
	dropNote   string
	// pacer paces an auto-paced replay (pace_run.go), made by its first
	// pass; paceTargets are the targets it has sent to.
	pacer       *Pacer
	paceTargets map[string]bool
	// pace is the pacer's last status, written by the mover's goroutine.
	pace atomic.Value
}

// Run executes replay id as owner until it finishes, stops, pauses, is
// cancelled, loses its lease or ctx ends, and returns the record as it
// stood. It never re-sends what the ledger says was sent. Another process
// owning the replay is ErrReplayBusy.
func (s *Service) Run(ctx context.Context, id, owner string) (Replay, error) {
	return s.run(ctx, id, owner, nil)
}

// run is Run, asking authz (when not nil) before anything is sent whether
// the replay may run (authorize.go).
func (s *Service) run(ctx context.Context, id, owner string, authz Authorizer) (Replay, error) {
	if s.d.Mover == nil {
		return Replay{}, errors.New("engine: run: a mover is required")
	}
	// The lease is held by this run, not by the worker: another run of the
	// same replay in the same process (a stray job) never passes for this
	// one's owner, in the heartbeat, the fence or the release.
	owner = runToken(owner)
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
		// ErrLeaseLost: nothing to release (the run's last write released
		// it, or it lapsed). Otherwise the lease lapses after LeaseTTL.
		if err := s.d.Leases.Release(rctx, id, owner); err != nil && !errors.Is(err, ErrLeaseLost) {
			s.warn(id, "", "release lease", err)
		}
	}()
	r, err := s.d.Replays.Get(ctx, id)
	if err != nil {
		return Replay{}, fmt.Errorf("engine: run %s: %w", id, err)
	}
	if r.State.Terminal() {
		return r, nil
	}
	if err := s.runnable(ctx, r); err != nil {
		return r, err
	}
	if authz != nil {
		if r, err = s.authorize(ctx, authz, r, owner, epoch); err != nil {
			return r, err
		}
	}
	// The items come column by column, as the plan keeps them (64 bytes
	// an item fewer, and no copy, at 1,000,000 items).
	f, cols, err := s.d.Tokens.LoadColumns(ctx, r.Token)
	if err != nil {
		return r, fmt.Errorf("engine: run %s: load preview: %w", id, err)
	}
	// Confirmed sends are done; pending intents were in flight when an
	// earlier run ended abruptly: they may have been sent, so they are never
	// sent again (they stay in the DLQ and are reported in doubt). The
	// ledger is read in pages.
	sent := map[string]int{}
	var doubt []LedgerEntry
	err = s.eachLedgerPage(ctx, id, func(page []LedgerEntry) error {
		for _, e := range page {
			sent[e.ID]++
			if e.Pending {
				doubt = append(doubt, e)
			}
		}
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("engine: run %s: ledger: %w", id, err)
	}
	if r.State == StatePaused || r.State == StateStopped {
		forgetRetried(&r)
	}
	warn := func(op string, err error) { s.warn(id, r.DLQ, op, err) }
	pl := planOf(cols, sent)
	pl.canaryDepth = s.cfg.CanaryDepth
	defer s.ownRest(ctx, f, r, pl.ids)() // before the lease goes (deferred above)
	rn := &run{
		s: s, r: r, f: f, owner: owner, epoch: epoch, plan: pl,
		hb:           &heartbeat{leases: s.d.Leases, id: id, owner: owner, ttl: s.cfg.LeaseTTL, clock: s.d.Clock, warn: warn},
		ctl:          &control{replays: s.d.Replays, id: id, every: s.cfg.ControlPoll, clock: s.d.Clock, warn: warn},
		returnedSeen: map[string]int{},
		bp:           bypassBase{ready0: -1},
	}
	rn.noteDoubt(doubt)
	// The ledger is the truth about what is in doubt: every pending intent,
	// whichever run wrote it.
	rn.r.InDoubt = len(doubt)
	if r.ResendInDoubt && len(doubt) > 0 {
		rn.rs = newResender(doubt)
	}
	rn.r.ResendInDoubt = rn.rs.left() > 0
	return rn.loop(ctx)
}

func (rn *run) loop(parent context.Context) (Replay, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	defer rn.releaseCursor("the run ended")
	go rn.hb.run(ctx, cancel)
	rn.ctl.refresh(ctx)
	go rn.ctl.watch(ctx)

	kind := EventStarted
	if rn.r.State == StatePaused || rn.r.State == StateStopped {
		kind = EventResumed
	}
	if err := rn.ctl.err(); err != nil {
		if r, again, err := rn.halt(parent, err); !again {
			return r, err
		}
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
		if r, again, err := rn.halt(parent, cause); !again {
			return r, err
		}
	} else if err != nil {
		r, _, err := rn.halt(parent, err)
		return r, err
	}
	defer rn.watchTap(ctx)() // the tap's loss is noticed at once, and repaired
	rn.r.State, rn.r.Note = StateRunning, ""
	if err := rn.put(ctx); err != nil {
		return rn.r, err
	}
	text := fmt.Sprintf("replay %s of %d message(s) from %s %s", rn.r.ID, rn.r.Total, rn.r.DLQ, kind)
	if tw := TakeOverWords(rn.r); tw != "" && kind == EventStarted {
		text += "; " + tw // what its approval took over, and from whom
	}
	if rn.mode == ReturnsReread {
		text += "; returns will be found by re-reading the DLQ once per step (" + rn.modeNote + ")"
	}
	rn.emit(ctx, kind, nil, text)
	rn.actor = ""
	rn.recount(ctx)
	if _, err := rn.reconcile(ctx); err != nil { // after a lost connection (reconcile.go)
		r, _, err := rn.halt(parent, err)
		return r, err
	}
	if err := rn.loadConfirmed(ctx); err != nil {
		r, _, err := rn.halt(parent, err)
		return r, err
	}
	rn.rejudge(ctx) // the step the last run left unjudged, first

	for rn.toSend() > 0 || rn.pending != nil {
		if err := rn.stopCause(ctx); err != nil {
			if r, again, err := rn.halt(parent, err); !again {
				return r, err
			}
			continue
		}
		if err := rn.sendBudget(ctx); err != nil {
			if r, again, err := rn.halt(parent, err); !again {
				return r, err
			}
			continue
		}
		res, stopErr, err := rn.step(ctx)
		if err == nil {
			err = stopErr
		}
		if err != nil {
			err = rn.rejoin(ctx, err) // nil: a paced replay goes on after a lost node (reconnect.go)
		}
		if err != nil {
			if r, again, err := rn.halt(parent, err); !again {
				return r, err
			}
			continue
		}
		if res.Planned == 0 && res.Sent == 0 && rn.rs.left() == 0 {
			continue // the rest was another replay's
		}
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
			note = rn.nothingSent(res)
			res.Observation = note
		}
		if note != "" {
			rn.releaseCursor("the replay stopped")
			rn.markCount(ctx)
			rn.r.State = StateStopped
			rn.r.Note = note
			rn.r.EndedAt = rn.s.d.Clock.Now()
			if err := rn.yield(ctx, StateStopped, StateCancelled); errors.Is(err, ErrDesireChanged) {
				rn.ctl.refresh(ctx) // cancelled while the step settled
				r, _, err := rn.halt(parent, ErrCancelRequested)
				return r, err
			} else if err != nil {
				return rn.r, err
			}
			rn.emit(ctx, EventStopped, &res, "stopped after step "+fmt.Sprint(res.Step)+": "+note)
			rn.s.scheduleFollowUps(ctx, rn.r)
			return rn.r, nil
		}
		rn.emit(ctx, EventStepPassed, &res, fmt.Sprintf("step %d passed: %s", res.Step, res.Observation))
	}
	rn.finishAcks(ctx)
	for {
		stop, err := rn.settleRest(ctx)
		if err == nil {
			err = stop
		}
		if err == nil {
			break
		}
		if r, again, err := rn.halt(parent, err); !again {
			return r, err
		}
	}
	return rn.end(ctx)
}

// toSend is how many copies the run has yet to send: the copies in doubt
// it resends and the plan's remaining picks.
func (rn *run) toSend() int { return rn.rs.left() + rn.plan.remaining() }

// end closes a run whose plan is exhausted. Only a replay that sent every
// message of its preview (and lost none), each copy seen leaving its
// target with none coming back since its step was judged, is finished
// (settle_unjudged.go); any other ends
// stopped, saying loudly what did not happen — above all how many
// messages disappeared, neither sent by dlqbot nor in the DLQ.
func (rn *run) end(ctx context.Context) (Replay, error) {
	rn.releaseCursor("the plan is exhausted")
	rn.r.EndedAt = rn.s.d.Clock.Now()
	kind := EventFinished
	rest := ""
	if rn.r.Sent+rn.r.Elsewhere >= rn.r.Total && rn.r.Missing == 0 {
		rest = rn.restNote()
		if d := rn.dupsNote(); d != "" && rest == "" {
			rest = d
		} else if d != "" {
			rest += "; " + d
		}
	}
	if rn.r.Sent+rn.r.Elsewhere >= rn.r.Total && rn.r.Missing == 0 && rest == "" {
		rn.r.State = StateFinished
		rn.r.Note = fmt.Sprintf("%d sent, %d settled, %s, %d missing, %d not delivered", rn.r.Sent, rn.r.Settled, rn.cameBack(), rn.r.Missing, rn.r.Failed)
		rn.r.Note += elsewhereNote(rn.r) + duplicatesNote(rn.r)
	} else {
		rn.markCount(ctx)
		rn.r.State = StateStopped
		rn.r.Note = Shortfall(rn.r)
		if rest != "" {
			rn.r.Note = rest + elsewhereNote(rn.r) + duplicatesNote(rn.r)
		}
		kind = EventStopped
	}
	if err := rn.put(ctx); err != nil {
		return rn.r, err
	}
	if kind == EventFinished {
		rn.emit(ctx, kind, nil, "finished: "+rn.r.Note)
	} else {
		rn.emit(ctx, kind, nil, "stopped: "+rn.r.Note)
	}
	rn.s.scheduleFollowUps(ctx, rn.r)
	return rn.r, nil
}

// stopCause says why sending must stop now, if it must.
func (rn *run) stopCause(ctx context.Context) error {
	if err := rn.controlErr(); err != nil {
		return err
	}
	if rn.hb.lost.Load() {
		return ErrLeaseLost
	}
	return ctx.Err()
}

// controlErr is the control's pause or cancel, but for a cancelled run
// watching the copies it sent (windDown): it has acted on the cancel.
func (rn *run) controlErr() error {
	if rn.winding.Load() {
		return nil
	}
	return rn.ctl.err()
}

// halt records why the run ended early. Pause and shutdown leave the replay
// paused (resumable); cancel ends it; a lost lease writes nothing — the
// fencing would refuse it, and the reaper reports the replay interrupted.
// again is true when the run must carry on instead: an operator resumed it
// after the owner decided to pause, before the pause was written.
func (rn *run) halt(parent context.Context, cause error) (r Replay, again bool, err error) {
	rn.releaseCursor("the replay halted") // a paused or stopped replay holds nothing
	rn.pending = nil                      // sent, never judged: kept for the next run, below
	rn.keepUnjudged()
	if stopsHere(cause) && !rn.hb.lost.Load() {
		rn.markCount(parent) // before the 5 s for the record's write begin
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 5*time.Second)
	defer cancel()
	switch {
	case errors.Is(cause, ErrLeaseLost) || rn.hb.lost.Load():
		return rn.r, false, fmt.Errorf("engine: run %s: %w", rn.r.ID, ErrLeaseLost)
	case errors.Is(cause, ErrCancelRequested):
		rn.actor = rn.ctl.actor()
		rn.r.State, rn.r.Note, rn.r.EndedAt = StateCancelled, "cancelled by "+orOperator(rn.actor), rn.s.d.Clock.Now()
		if err := rn.put(ctx); err != nil {
			return rn.r, false, err
		}
		rn.emit(ctx, EventCancelled, nil, fmt.Sprintf("cancelled: %d sent, %d left in %s untouched", rn.r.Sent, rn.plan.remaining(), rn.r.DLQ))
		// The copies already sent are still watched for their step's
		// grace: the cancelled record then counts what came back.
		if rn.windDown(parent) {
			wctx, wcancel := context.WithTimeout(context.WithoutCancel(parent), 5*time.Second)
			defer wcancel()
			if err := rn.put(wctx); err != nil {
				return rn.r, false, err
			}
			rn.emit(wctx, EventCancelled, nil, rn.cancelledText())
		}
		return rn.r, false, nil
	case errors.Is(cause, ErrPauseRequested):
		rn.actor = rn.ctl.actor()
		rn.r.State, rn.r.Note = StatePaused, "paused by "+orOperator(rn.actor)
		err := rn.yield(ctx, StatePaused, StateRunning, StateCancelled)
		if errors.Is(err, ErrDesireChanged) {
			// Resumed or cancelled since the owner saw the pause: the
			// pause was never written; act on the new desire.
			rn.r.State, rn.r.Note, rn.actor = StateRunning, "", ""
			rn.ctl.refresh(ctx)
			if rn.ctl.load() == StatePaused {
				// The refresh failed; the store said the pause is gone.
				rn.ctl.desired.Store(StateRunning)
			}
			if rn.ctl.load() == StateCancelled {
				return rn.halt(parent, ErrCancelRequested)
			}
			if parent.Err() != nil {
				return rn.halt(parent, parent.Err())
			}
			rn.rejudge(parent) // the steps kept above are judged first
			return rn.r, true, nil
		}
		if err != nil {
			return rn.r, false, err
		}
	case errors.Is(cause, ErrReadBudget) || errors.Is(cause, ErrBudgetUnknown):
		// Not a fault: the replay stopped before a read that could drop
		// messages, and resumes once the limit is raised (or, when the
		// budget could not be told, once the management API answers).
		note := "stopped by the read budget (" + cause.Error() + "); raise the delivery limit, then resume"
		var rbe *ReadBudgetError
		var bue *BudgetUnknownError
		switch {
		case errors.As(cause, &rbe):
			note = "stopped by the " + rbe.Error() + ", then resume"
		case errors.As(cause, &bue):
			note = "stopped: " + bue.Error() + "; resume once the management API answers"
		}
		rn.r.State, rn.r.Note = StateStopped, note
		rn.r.EndedAt = rn.s.d.Clock.Now()
		if err := rn.yield(ctx, StateStopped, StateCancelled); errors.Is(err, ErrDesireChanged) {
			rn.ctl.refresh(ctx)
			return rn.halt(parent, ErrCancelRequested)
		} else if err != nil {
			return rn.r, false, err
		}
		// No follow-up checks: each would read the DLQ too.
		rn.emit(ctx, EventStopped, nil, rn.r.Note)
		return rn.r, false, nil
	case errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded):
		rn.r.State, rn.r.Note = StatePaused, "paused: the process running it shut down; resume to continue"
		if err := rn.yield(ctx, StatePaused, StateCancelled); errors.Is(err, ErrDesireChanged) {
			rn.ctl.refresh(ctx)
			return rn.halt(parent, ErrCancelRequested)
		} else if err != nil {
			return rn.r, false, err
		}
	case errors.Is(cause, ErrManagementDown):
		return rn.stopForAPI(parent, ctx, cause)
	default:
		rn.r.State, rn.r.Note = StateStopped, "stopped: "+cause.Error()
		rn.r.EndedAt = rn.s.d.Clock.Now()
		if err := rn.yield(ctx, StateStopped, StateCancelled); errors.Is(err, ErrDesireChanged) {
			rn.ctl.refresh(ctx)
			return rn.halt(parent, ErrCancelRequested)
		} else if err != nil {
			return rn.r, false, err
		}
		rn.emit(ctx, EventStopped, nil, rn.r.Note)
		return rn.r, false, cause
	}
	rn.emit(ctx, EventPaused, nil, fmt.Sprintf("paused: %d sent, %d left in %s untouched", rn.r.Sent, rn.plan.remaining(), rn.r.DLQ))
	return rn.r, false, nil
}

// stopsHere reports whether halt leaves the replay stopped for cause (a
// fault, the read budget), rather than cancelled, paused or abandoned.
func stopsHere(cause error) bool {
	for _, not := range []error{ErrLeaseLost, ErrCancelRequested, ErrPauseRequested, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(cause, not) {
			return false
		}
	}
	return true
}

// yield is the run's last write when it leaves the replay resumable
// (paused, stopped): the record, the desired state (so that only a new
// resume makes a worker run it again) and the lease's release in one
// step, refused with ErrDesireChanged when an operator asked since for
// one of the states unless.
func (rn *run) yield(ctx context.Context, desired State, unless ...State) error {
	rn.r.UpdatedAt = rn.s.d.Clock.Now()
	if err := rn.s.d.Replays.Yield(ctx, rn.r, rn.owner, rn.epoch, desired, unless...); err != nil {
		if errors.Is(err, ErrLeaseLost) {
			rn.hb.lost.Store(true)
		} else if rn.hb.lost.Load() && !errors.Is(err, ErrDesireChanged) {
			err = ErrLeaseLost // the run was cancelled for it (see put)
		}
		if errors.Is(err, ErrDesireChanged) {
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
		if errors.Is(err, ErrLeaseLost) {
			rn.hb.lost.Store(true)
		} else if rn.hb.lost.Load() {
			// The heartbeat found the lease gone and cancelled the run:
			// the write failed for that (a cancelled context), not for
			// the store.
			err = ErrLeaseLost
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
		if f.Kind == FailureInDoubt {
			known[f.ID] = true
		}
	}
	for _, e := range doubt {
		if !known[e.ID] {
			known[e.ID] = true
			rn.fail(Failure{ID: e.ID, Target: e.Target, Kind: FailureInDoubt,
				Detail: "in flight when an earlier run ended abruptly: it may have been delivered, so a plain resume does not send it again (resume resend=in-doubt does, marked x-dlqbot-possible-duplicate); its original stays in the DLQ"})
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

// runToken names one run of a replay: the worker's id and random bits, so
// that two runs of one replay in one process are different owners.
func runToken(worker string) string {
	return NewID(worker + "/")
}

// runnable says whether a worker may run r now: an approved (queued)
// replay, or a paused or stopped one whose desired state is running (a
// resume asked for it). A duplicate or stale job finds neither and is
// dropped with ErrNotRunnable; a running replay without an owner is the
// reaper's to report, never re-run.
func (s *Service) runnable(ctx context.Context, r Replay) error {
	if r.State == StateQueued {
		return nil // a pause or cancel asked for meanwhile is acted on at once
	}
	want, _, err := s.d.Replays.Desired(ctx, r.ID)
	if err != nil {
		return fmt.Errorf("engine: run %s: desired state: %w", r.ID, err)
	}
	if r.State != StateRunning && want == StateRunning {
		return nil
	}
	why := "nobody asked to resume it"
	switch {
	case r.State == StateRunning:
		why = "its owner is gone (it will be reported interrupted)"
	case want != "":
		why = "the last request was " + verbOf(want)
	}
	return fmt.Errorf("engine: run %s: %w: it is %s and %s", r.ID, ErrNotRunnable, r.State, why)
}
