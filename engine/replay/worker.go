package replay

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// Work takes replays from Deps.Jobs and runs them until ctx ends,
// announcing itself in Deps.Registry; without either it returns an error
// at once. A job is acknowledged as soon as it is taken: ownership is
// the lease, not the stream entry, so a long replay never looks dead to the
// stream, and a crashed owner's replay is reported interrupted by the
// reaper, never silently re-run. On shutdown (ctx cancelled) every running
// replay finishes its in-flight copies, is left paused and releases its
// lease before Work returns.
func (s *Service) Work(ctx context.Context, cfg engine.WorkerConfig) error {
	jobs, reg := s.d.Jobs, s.d.Registry
	if jobs == nil || reg == nil {
		return errors.New("engine: work: no job queue or worker registry: the engine was built without Deps.Jobs or Deps.Registry")
	}
	if cfg.ID == "" {
		cfg.ID = engine.NewID("w_")
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
	go func() { defer wg.Done(); s.drainTaps(ctx, 0) }()
	lastAnnounce := time.Time{}
	for ctx.Err() == nil {
		if s.d.Clock.Now().Sub(lastAnnounce) > s.cfg.LeaseTTL/3 {
			if err := reg.Announce(ctx, cfg.ID, s.cfg.LeaseTTL); err == nil {
				lastAnnounce = s.d.Clock.Now()
			} else if ctx.Err() == nil {
				s.base.Warn("", "", "announce worker", err) // retried at the next job
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
				s.base.Warn("", "", "take job", err)
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
			case err == nil, errors.Is(err, engine.ErrReplayBusy), errors.Is(err, engine.ErrRunRefused): // authorize logged it
			case errors.Is(err, engine.ErrReturnsUnverified):
				s.cfg.Log.Error().Str("worker", cfg.ID).Str("replay_id", id).Str("op", "run").Err(err).Msg("replay stopped: the tap's record of its returns failed its check, so it cannot tell whether copies came back")
			case errors.Is(err, engine.ErrBadSignature):
				// Its record cannot be trusted, so it is neither run nor
				// rewritten; the worker goes on with the others.
				s.cfg.Log.Error().Str("worker", cfg.ID).Str("replay_id", id).Str("op", "run").Err(err).Msg("replay skipped: its record failed the signature check; nothing was sent")
			case errors.Is(err, engine.ErrNotRunnable):
				s.cfg.Log.Warn().Str("worker", cfg.ID).Str("replay_id", id).Str("op", "run").Err(err).Msg("job dropped")
			default:
				s.cfg.Log.Error().Str("worker", cfg.ID).Str("replay_id", id).Str("op", "run").Err(err).Msg("replay run failed")
			}
		}()
	}
	return nil
}
