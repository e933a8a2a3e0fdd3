package review

import (
	"context"
	"errors"
	"fmt"
	"github.com/stroma/dlqbot/engine"
)

// resume asks for a paused or stopped replay to continue and, when the
// engine has Deps.Jobs, hands it to a worker (without, the caller runs it
// itself, as the terminal does when no worker is running). The request is
// recorded atomically with the check of the replay's state: a resume
// racing a pause either reaches the owner before it paused (it carries on)
// or finds the replay paused (and hands it out). A running replay with a
// pending pause just carries on. The returned record is the replay as it stands.
func (s *Service) resume(ctx context.Context, id, by string) (engine.Replay, error) {
	r, res, err := s.desire(ctx, id, by, engine.StateRunning, engine.StatePaused, engine.StateStopped, engine.StateRunning)
	if err != nil {
		return r, err
	}
	if res.State == engine.StateRunning {
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

// pause asks the owner of a running replay to pause (within 1s).
func (s *Service) pause(ctx context.Context, id, by string) (engine.Replay, error) {
	r, _, err := s.desire(ctx, id, by, engine.StatePaused, engine.StateQueued, engine.StateRunning)
	return r, err
}

// cancel asks for a replay to end; a paused, stopped or queued replay is
// cancelled at once, a running one by its owner within 1s. Messages not yet
// sent stay in the DLQ.
func (s *Service) cancel(ctx context.Context, id, by string) (engine.Replay, error) {
	r, _, err := s.desire(ctx, id, by, engine.StateCancelled, engine.StateQueued, engine.StateRunning, engine.StatePaused, engine.StateStopped)
	if err != nil || r.State == engine.StateRunning {
		return r, err
	}
	// If an owner holds the lease meanwhile, it acts on the desired state
	// within a second; the update below is only for replays nobody runs.
	cancelled := false
	uerr := s.d.Replays.UpdateUnowned(ctx, id, func(cur *engine.Replay) error {
		if cur.State == engine.StateRunning || cur.State.Terminal() {
			return engine.ErrNoChange
		}
		cur.State, cur.Note, cur.EndedAt = engine.StateCancelled, "cancelled by "+OrOperator(by), s.d.Clock.Now()
		cancelled = true
		return nil
	})
	if uerr != nil && !errors.Is(uerr, engine.ErrNoChange) {
		// The desire is recorded, so an owner that takes the replay acts on
		// it (a held lease is that race); worth knowing all the same.
		s.Warn(id, "", "cancel unowned replay", uerr)
	}
	r, err = s.d.Replays.Get(ctx, id)
	if err == nil && cancelled && s.d.Notifier != nil {
		// Nobody runs it, so no owner reports the cancellation: report it here.
		s.d.Notifier.Notify(ctx, engine.Event{Kind: engine.EventCancelled, Replay: r, Actor: by, At: s.d.Clock.Now(),
			Text: fmt.Sprintf("cancelled by %s: %d sent, the rest left in %s untouched", OrOperator(by), r.Sent, r.DLQ)})
	}
	return r, err
}

// Status returns a replay's record.
func (s *Service) Status(ctx context.Context, id string) (engine.Replay, error) {
	r, err := s.d.Replays.Get(ctx, id)
	if err != nil {
		return r, fmt.Errorf("engine: status %s: %w", id, err)
	}
	return r, nil
}
