package review

import (
	"context"
	"errors"
	"fmt"
	"github.com/stroma/dlqbot/engine"
	"strings"
	"time"
)

// followUpRetry is how long a follow-up that could not run waits to be retried.
const followUpRetry = time.Minute

// FollowUps runs due follow-up checks until ctx ends, polling every
// interval (default 1s) against the engine's clock. Every process runs it;
// the store hands each due check to exactly one of them. Each check is
// delivered to the notifier as an EventFollowUp.
func (s *Service) FollowUps(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = time.Second
	}
	for {
		s.RunDue(ctx)
		select {
		case <-ctx.Done():
			return
		case <-s.d.Clock.After(every):
		}
	}
}

// RunDue claims and runs the follow-ups due now, and reports how many ran.
func (s *Service) RunDue(ctx context.Context) int {
	now := s.d.Clock.Now()
	members, err := s.d.Schedule.ClaimDue(ctx, now, 50)
	if err != nil {
		if ctx.Err() == nil {
			s.Warn("", "", "claim follow-ups", err)
		}
		return 0
	}
	for _, m := range members {
		id, label, _ := strings.Cut(m, ":")
		c, err := s.Check(ctx, id, "+"+label)
		if errors.Is(err, engine.ErrBadSignature) {
			// Its record cannot be trusted: this follow-up is dropped, not
			// retried, and the others run.
			s.cfg.Log.Error().Str("replay_id", id).Str("op", "run follow-up").Err(err).Msg("follow-up skipped: the replay's record failed the signature check")
			continue
		}
		if err != nil {
			s.Warn(id, "", "run follow-up", err) // retried in followUpRetry
			if err := s.d.Schedule.Add(ctx, m, now.Add(followUpRetry)); err != nil {
				// Claimed and not re-added: this follow-up will not run.
				s.Warn(id, "", "reschedule follow-up", err)
			}
			continue
		}
		if s.d.Notifier != nil {
			r, err := s.d.Replays.Get(ctx, id)
			if err != nil {
				// Check just read it: the event goes out with the id alone.
				s.Warn(id, "", "read replay for follow-up", err)
				r = engine.Replay{ID: id}
			}
			s.d.Notifier.Notify(ctx, engine.Event{Kind: engine.EventFollowUp, Replay: r, Check: &c, At: now,
				Text: fmt.Sprintf("follow-up %s of %s: %d of %d came back, %d new failures", c.Label, id, c.Returned, c.Replayed, c.NewFailures)})
		}
	}
	return len(members)
}
