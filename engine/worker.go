package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// WorkerConfig tunes a worker; zero values mean the defaults.
type WorkerConfig struct {
	// ID names the worker in Redis (default: a random id).
	ID string
	// Concurrency is how many replays it runs at once (default 4).
	Concurrency int
	// Block is how long one wait for work lasts (default 1s).
	Block time.Duration
	// Authorizer, when set, is asked before each run sends anything
	// whether the replay's approval (and resume) satisfies this worker's
	// policy; a refused replay is left stopped, nothing sent.
	Authorizer Authorizer
}

// Work takes replays from Deps.Jobs and runs them until ctx ends,
// announcing itself in Deps.Registry; without either it returns an error
// at once. A job is acknowledged as soon as it is taken: ownership is
// the lease, not the stream entry, so a long replay never looks dead to the
// stream, and a crashed owner's replay is reported interrupted by the
// reaper, never silently re-run. On shutdown (ctx cancelled) every running
// replay finishes its in-flight copies, is left paused and releases its
// lease before Work returns.
func (s *Service) Work(ctx context.Context, cfg WorkerConfig) error {
	jobs, reg := s.d.Jobs, s.d.Registry
	if jobs == nil || reg == nil {
		return errors.New("engine: work: no job queue or worker registry: the engine was built without Deps.Jobs or Deps.Registry")
	}
	if cfg.ID == "" {
		cfg.ID = NewID("w_")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	if cfg.Block <= 0 {
		cfg.Block = time.Second
	}
	slots := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	// Every worker records the DLQs' taps, so returns are recorded even
	// while no replay of that DLQ is settling (for check and follow-ups).
	wg.Add(1)
	go func() { defer wg.Done(); s.DrainTaps(ctx, 0) }()
	lastAnnounce := time.Time{}
	for ctx.Err() == nil {
		if s.d.Clock.Now().Sub(lastAnnounce) > s.cfg.LeaseTTL/3 {
			if err := reg.Announce(ctx, cfg.ID, s.cfg.LeaseTTL); err == nil {
				lastAnnounce = s.d.Clock.Now()
			} else if ctx.Err() == nil {
				s.warn("", "", "announce worker", err) // retried at the next job
			}
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		id, ack, err := jobs.Next(ctx, cfg.ID, cfg.Block)
		if err != nil || id == "" {
			<-slots
			if err != nil && ctx.Err() == nil {
				s.warn("", "", "take job", err)
				select { // the store is unreachable: back off briefly
				case <-ctx.Done():
				case <-s.d.Clock.After(cfg.Block):
				}
			}
			continue
		}
		if ack != nil {
			if err := ack(); err != nil {
				// The job may be handed out again: harmless, since a worker
				// runs a replay only when its desired state is running,
				// but worth knowing.
				s.cfg.Log.Warn().Str("worker", cfg.ID).Str("replay_id", id).Str("op", "acknowledge job").Err(err).Msg("job not acknowledged")
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			_, err := s.run(ctx, id, cfg.ID, cfg.Authorizer)
			switch {
			case err == nil, errors.Is(err, ErrReplayBusy), errors.Is(err, ErrRunRefused): // authorize logged it
			case errors.Is(err, ErrReturnsUnverified):
				s.cfg.Log.Error().Str("worker", cfg.ID).Str("replay_id", id).Str("op", "run").Err(err).Msg("replay stopped: the tap's record of its returns failed its check, so it cannot tell whether copies came back")
			case errors.Is(err, ErrBadSignature):
				// Its record cannot be trusted, so it is neither run nor
				// rewritten; the worker goes on with the others.
				s.cfg.Log.Error().Str("worker", cfg.ID).Str("replay_id", id).Str("op", "run").Err(err).Msg("replay skipped: its record failed the signature check; nothing was sent")
			case errors.Is(err, ErrNotRunnable):
				s.cfg.Log.Warn().Str("worker", cfg.ID).Str("replay_id", id).Str("op", "run").Err(err).Msg("job dropped")
			default:
				s.cfg.Log.Error().Str("worker", cfg.ID).Str("replay_id", id).Str("op", "run").Err(err).Msg("replay run failed")
			}
		}()
	}
	return nil
}

// Resume asks for a paused or stopped replay to continue and, when the
// engine has Deps.Jobs, hands it to a worker (without, the caller runs it
// itself, as the terminal does when no worker is running). The request is
// recorded atomically with the check of the replay's state: a resume
// racing a pause either reaches the owner before it paused (it carries on)
// or finds the replay paused (and hands it out). A running replay with a
// pending pause just carries on. The returned record is the replay as it stands.
func (s *Service) Resume(ctx context.Context, id, by string) (Replay, error) {
	r, res, err := s.desire(ctx, id, by, StateRunning, StatePaused, StateStopped, StateRunning)
	if err != nil {
		return r, err
	}
	if res.State == StateRunning {
		return r, nil // its owner sees the desire: a pending pause is withdrawn
	}
	if s.d.Jobs == nil {
		return r, nil
	}
	if err := s.d.Jobs.Enqueue(ctx, id); err != nil {
		return r, fmt.Errorf("engine: resume %s: the resume is recorded but no worker could be told (resume again): %w", id, err)
	}
	return r, nil
}

// ErrNotControllable means a replay's state does not allow the action.
var ErrNotControllable = errors.New("replay cannot be controlled")

// Pause asks the owner of a running replay to pause (within 1s).
func (s *Service) Pause(ctx context.Context, id, by string) (Replay, error) {
	r, _, err := s.desire(ctx, id, by, StatePaused, StateQueued, StateRunning)
	return r, err
}

// Cancel asks for a replay to end; a paused, stopped or queued replay is
// cancelled at once, a running one by its owner within 1s. Messages not yet
// sent stay in the DLQ.
func (s *Service) Cancel(ctx context.Context, id, by string) (Replay, error) {
	r, _, err := s.desire(ctx, id, by, StateCancelled, StateQueued, StateRunning, StatePaused, StateStopped)
	if err != nil || r.State == StateRunning {
		return r, err
	}
	// If an owner holds the lease meanwhile, it acts on the desired state
	// within a second; the update below is only for replays nobody runs.
	cancelled := false
	uerr := s.d.Replays.UpdateUnowned(ctx, id, func(cur *Replay) error {
		if cur.State == StateRunning || cur.State.Terminal() {
			return ErrNoChange
		}
		cur.State, cur.Note, cur.EndedAt = StateCancelled, "cancelled by "+orOperator(by), s.d.Clock.Now()
		cancelled = true
		return nil
	})
	if uerr != nil && !errors.Is(uerr, ErrNoChange) {
		// The desire is recorded, so an owner that takes the replay acts on
		// it (a held lease is that race); worth knowing all the same.
		s.warn(id, "", "cancel unowned replay", uerr)
	}
	r, err = s.d.Replays.Get(ctx, id)
	if err == nil && cancelled && s.d.Notifier != nil {
		// Nobody runs it, so no owner reports the cancellation: report it here.
		s.d.Notifier.Notify(ctx, Event{Kind: EventCancelled, Replay: r, Actor: by, At: s.d.Clock.Now(),
			Text: fmt.Sprintf("cancelled by %s: %d sent, the rest left in %s untouched", orOperator(by), r.Sent, r.DLQ)})
	}
	return r, err
}

// ErrNoChange tells an Updater to leave the record as it is.
var ErrNoChange = errors.New("no change")

// Status returns a replay's record.
func (s *Service) Status(ctx context.Context, id string) (Replay, error) {
	r, err := s.d.Replays.Get(ctx, id)
	if err != nil {
		return r, fmt.Errorf("engine: status %s: %w", id, err)
	}
	return r, nil
}
