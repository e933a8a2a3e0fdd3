package replay

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/review"
)

// A replay's run, by concern: this file holds the run's state and how a
// worker starts one (the lease, the record, the preview and the ledger);
// run_loop.go its loop over the steps; run_halt.go and run_stop.go why
// and how it halts early (pause, cancel, the read budget, a fault);
// run_end.go how it ends once the plan is exhausted; run_record.go its
// writes of the record and its events; run_words.go the sentences of its
// shortfalls.

// run is one owner's execution of one replay: the loop over its steps,
// their sends and its record. Four concerns keep their own state and
// methods: ownership (ownership.go), recovery (recovery.go), returnsFinder
// (returns.go) and judge (judge.go); each embeds a runPart.
type run struct {
	s     *Service
	r     engine.Replay
	f     engine.Frozen
	owner string
	epoch int64
	plan  *engine.Plan
	hb    *heartbeat
	ctl   *control
	// own, rec, ret and jd are the run's concerns, each with the state
	// it keeps (ownership.go, recovery.go, returns.go, judge.go).
	own ownership
	rec recovery
	ret returnsFinder
	jd  judge
	// lastProgress is when a step last wrote its progress.
	lastProgress time.Time
	// actor is who caused the event being emitted, when a person did.
	actor string
	// stepSent are the ids this step sent or may have sent.
	stepSent *sentSet
	// stepMoves is what the current step's moves did (step.go).
	stepMoves stepMoves
	// cur is the read of the DLQ the steps continue (nil: none open), and
	// curOpened when it opened (see cursor.go).
	cur       engine.Cursor
	curOpened time.Time
	// beside is set, for a step, when another dlqbot replay read the DLQ
	// as it began (a run without a tap then reads without a cursor:
	// cursor.go).
	beside bool
	// pacer paces an auto-paced replay (pace_run.go), made by its first
	// pass; paceTargets are the targets it has sent to.
	pacer       *engine.Pacer
	paceTargets map[string]bool
	// pace is the pacer's last status, written by the mover's goroutine.
	pace atomic.Value
}

// Run executes replay id as owner until it finishes, stops, pauses, is
// cancelled, loses its lease or ctx ends, and returns the record as it
// stood. It never re-sends what the ledger says was sent. Another process
// owning the replay is ErrReplayBusy.
func (s *Service) Run(ctx context.Context, id, owner string) (engine.Replay, error) {
	return s.run(ctx, id, owner, nil)
}

// run is Run, asking authz (when not nil) before anything is sent whether
// the replay may run (runner.go).
func (s *Service) run(ctx context.Context, id, owner string, authz engine.Authorizer) (engine.Replay, error) {
	// The lease is held by this run, not by the worker: another run of the
	// same replay in the same process (a stray job) never passes for this
	// one's owner, in the heartbeat, the fence or the release.
	owner = runToken(owner)
	epoch, ok, err := s.d.Leases.Acquire(ctx, id, owner, s.cfg.LeaseTTL)
	if err != nil {
		return engine.Replay{}, fmt.Errorf("engine: run %s: acquire lease: %w", id, err)
	}
	if !ok {
		return engine.Replay{}, fmt.Errorf("engine: run %s: %w", id, engine.ErrReplayBusy)
	}
	defer s.releaseLease(ctx, id, owner)
	r, err := s.d.Replays.Get(ctx, id)
	if err != nil {
		return engine.Replay{}, fmt.Errorf("engine: run %s: %w", id, err)
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
	sent, doubt, err := s.readLedger(ctx, id)
	if err != nil {
		return r, fmt.Errorf("engine: run %s: ledger: %w", id, err)
	}
	if r.State == engine.StatePaused || r.State == engine.StateStopped {
		forgetRetried(&r)
	}
	pl := engine.PlanOf(cols, sent)
	pl.CanaryDepth = s.cfg.CanaryDepth
	defer s.ownRest(ctx, f, r, pl.IDs)() // before the lease goes (deferred above)
	return s.newRun(r, f, owner, epoch, pl, doubt).loop(ctx)
}

// releaseLease gives up the lease owner holds on replay id, when the run
// ends.
func (s *Service) releaseLease(ctx context.Context, id, owner string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// ErrLeaseLost: nothing to release (the run's last write released
	// it, or it lapsed). Otherwise the lease lapses after LeaseTTL.
	if err := s.d.Leases.Release(rctx, id, owner); err != nil && !errors.Is(err, engine.ErrLeaseLost) {
		s.base.Warn(id, "", "release lease", err)
	}
}

// readLedger reads what replay id sent, in pages: sent counts the copies
// per id, and doubt are the pending intents. Confirmed sends are done;
// pending intents were in flight when an earlier run ended abruptly: they
// may have been sent, so they are never sent again (they stay in the DLQ
// and are reported in doubt).
func (s *Service) readLedger(ctx context.Context, id string) (sent map[string]int, doubt []engine.LedgerEntry, err error) {
	sent = map[string]int{}
	err = s.base.EachLedgerPage(ctx, id, func(page []engine.LedgerEntry) error {
		for _, e := range page {
			sent[e.ID]++
			if e.Pending {
				doubt = append(doubt, e)
			}
		}
		return nil
	})
	return sent, doubt, err
}

// runPart is what each of a run's concerns knows of the run: the
// service, the replay's id and DLQ (fixed for the run's life), and the run
// itself, for what a concern asks of the run or of another concern.
type runPart struct {
	rn      *run
	s       *Service
	id, dlq string
}

// newRun is owner's run of r (with epoch, its lease's fencing epoch) over
// preview f and plan pl, knowing the copies in doubt.
func (s *Service) newRun(r engine.Replay, f engine.Frozen, owner string, epoch int64, pl *engine.Plan, doubt []engine.LedgerEntry) *run {
	id := r.ID
	warn := func(op string, err error) { s.base.Warn(id, r.DLQ, op, err) }
	rn := &run{
		s: s, r: r, f: f, owner: owner, epoch: epoch, plan: pl,
		hb:  &heartbeat{leases: s.d.Leases, id: id, owner: owner, ttl: s.cfg.LeaseTTL, clock: s.d.Clock, warn: warn},
		ctl: &control{replays: s.d.Replays, id: id, every: s.cfg.ControlPoll, clock: s.d.Clock, warn: warn},
	}
	part := runPart{rn: rn, s: s, id: id, dlq: r.DLQ}
	rn.own.runPart, rn.rec.runPart, rn.ret.runPart, rn.jd.runPart = part, part, part, part
	rn.ret.returnedSeen = map[string]int{}
	rn.ret.bp = bypassBase{ready0: -1}
	rn.noteDoubt(doubt)
	// The ledger is the truth about what is in doubt: every pending intent,
	// whichever run wrote it.
	rn.r.InDoubt = len(doubt)
	if r.ResendInDoubt && len(doubt) > 0 {
		rn.rec.rs = newResender(doubt)
	}
	rn.r.ResendInDoubt = rn.rec.rs.left() > 0
	return rn
}

// noteDoubt records copies an earlier run may have sent (once each).
func (rn *run) noteDoubt(doubt []engine.LedgerEntry) {
	known := map[string]bool{}
	for _, f := range rn.r.Failures {
		if f.Kind == engine.FailureInDoubt {
			known[f.ID] = true
		}
	}
	for _, e := range doubt {
		if !known[e.ID] {
			known[e.ID] = true
			rn.fail(engine.Failure{ID: e.ID, Target: e.Target, Kind: engine.FailureInDoubt,
				Detail: "in flight when an earlier run ended abruptly: it may have been delivered, so a plain resume does not send it again (resume resend=in-doubt does, marked x-dlqbot-possible-duplicate); its original stays in the DLQ"})
		}
	}
}

// runToken names one run of a replay: the worker's id and random bits, so
// that two runs of one replay in one process are different owners.
func runToken(worker string) string {
	return engine.NewID(worker + "/")
}

// runnable says whether a worker may run r now: an approved (queued)
// replay, or a paused or stopped one whose desired state is running (a
// resume asked for it). A duplicate or stale job finds neither and is
// dropped with ErrNotRunnable; a running replay without an owner is the
// reaper's to report, never re-run.
func (s *Service) runnable(ctx context.Context, r engine.Replay) error {
	if r.State == engine.StateQueued {
		return nil // a pause or cancel asked for meanwhile is acted on at once
	}
	want, _, err := s.d.Replays.Desired(ctx, r.ID)
	if err != nil {
		return fmt.Errorf("engine: run %s: desired state: %w", r.ID, err)
	}
	if r.State != engine.StateRunning && want == engine.StateRunning {
		return nil
	}
	why := "nobody asked to resume it"
	switch {
	case r.State == engine.StateRunning:
		why = "its owner is gone (it will be reported interrupted)"
	case want != "":
		why = "the last request was " + review.VerbOf(want)
	}
	return fmt.Errorf("engine: run %s: %w: it is %s and %s", r.ID, engine.ErrNotRunnable, r.State, why)
}

// authorize asks authz whether r may run, before anything is sent. When it
// may not (or the answer could not be had), the replay is left stopped
// with the reason in its note, announced as a stopped event, and
// ErrRunRefused is returned: nothing was sent. A resume asks again.
func (s *Service) authorize(ctx context.Context, authz engine.Authorizer, r engine.Replay, owner string, epoch int64) (engine.Replay, error) {
	by := ""
	if r.State != engine.StateQueued {
		_, who, err := s.d.Replays.Desired(ctx, r.ID)
		if err != nil {
			return r, fmt.Errorf("engine: run %s: desired state: %w", r.ID, err)
		}
		by = who
	}
	aerr := authz.AuthorizeRun(ctx, r, by)
	if aerr == nil {
		return r, nil
	}
	s.cfg.Log.Error().Str("replay_id", r.ID).Str("dlq", r.DLQ).Str("approver", r.Approver).Str("resumed_by", by).Err(aerr).
		Msg("replay refused by this worker's policy: nothing was sent")
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	now := s.d.Clock.Now()
	r.State, r.EndedAt, r.UpdatedAt = engine.StateStopped, now, now
	r.Note = "refused by the worker's permissions policy, nothing was sent: " + aerr.Error()
	err := s.d.Replays.Yield(wctx, r, owner, epoch, engine.StateStopped, engine.StateCancelled)
	if errors.Is(err, engine.ErrDesireChanged) {
		// Cancelled meanwhile: it ends cancelled, still with nothing sent.
		_, who, _ := s.d.Replays.Desired(wctx, r.ID)
		r.State, r.Note = engine.StateCancelled, "cancelled by "+review.OrOperator(who)+"; "+r.Note
		err = s.d.Replays.Put(wctx, r, owner, epoch)
	}
	if err != nil {
		s.base.Warn(r.ID, r.DLQ, "record a refused run", err)
		return r, fmt.Errorf("engine: run %s: %w, and its record could not be written: %w", r.ID, engine.ErrRunRefused, err)
	}
	if s.d.Notifier != nil {
		kind := engine.EventStopped
		if r.State == engine.StateCancelled {
			kind = engine.EventCancelled
		}
		s.d.Notifier.Notify(wctx, engine.Event{Kind: kind, Replay: r, At: now, Text: r.Note})
	}
	return r, fmt.Errorf("engine: run %s: %w: %w", r.ID, engine.ErrRunRefused, aerr)
}
