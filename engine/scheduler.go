package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Schedule holds timed work in the store: members scored by due time,
// each claimed by exactly one caller.
type Schedule interface {
	Add(ctx context.Context, member string, due time.Time) error
	ClaimDue(ctx context.Context, now time.Time, n int) ([]string, error)
}

// DefaultFollowUps are when a finished or stopped replay is checked again.
var DefaultFollowUps = []time.Duration{5 * time.Minute, 2 * time.Hour, 24 * time.Hour}

// followUpRetry is how long a follow-up that could not run waits to be retried.
const followUpRetry = time.Minute

// scheduleFollowUps queues the follow-up checks of a replay that ended at
// r.EndedAt. Members are deterministic ("<replay>:5m"), so scheduling twice
// schedules once.
func (s *Service) scheduleFollowUps(ctx context.Context, r Replay) {
	for _, d := range s.cfg.FollowUps {
		if err := s.d.Schedule.Add(ctx, r.ID+":"+shortDuration(d), r.EndedAt.Add(d)); err != nil {
			s.warn(r.ID, r.DLQ, "schedule follow-up", err)
		}
	}
}

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
			s.warn("", "", "claim follow-ups", err)
		}
		return 0
	}
	for _, m := range members {
		id, label, _ := strings.Cut(m, ":")
		c, err := s.Check(ctx, id, "+"+label)
		if errors.Is(err, ErrBadSignature) {
			// Its record cannot be trusted: this follow-up is dropped, not
			// retried, and the others run.
			s.cfg.Log.Error().Str("replay_id", id).Str("op", "run follow-up").Err(err).Msg("follow-up skipped: the replay's record failed the signature check")
			continue
		}
		if err != nil {
			s.warn(id, "", "run follow-up", err) // retried in followUpRetry
			if err := s.d.Schedule.Add(ctx, m, now.Add(followUpRetry)); err != nil {
				// Claimed and not re-added: this follow-up will not run.
				s.warn(id, "", "reschedule follow-up", err)
			}
			continue
		}
		if s.d.Notifier != nil {
			r, err := s.d.Replays.Get(ctx, id)
			if err != nil {
				// Check just read it: the event goes out with the id alone.
				s.warn(id, "", "read replay for follow-up", err)
				r = Replay{ID: id}
			}
			s.d.Notifier.Notify(ctx, Event{Kind: EventFollowUp, Replay: r, Check: &c, At: now,
				Text: fmt.Sprintf("follow-up %s of %s: %d of %d came back, %d new failures", c.Label, id, c.Returned, c.Replayed, c.NewFailures)})
		}
	}
	return len(members)
}

// shortDuration renders 5m0s as 5m and 24h0m0s as 24h.
func shortDuration(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	s = strings.TrimSuffix(s, "0m")
	if s == "" {
		return "0s"
	}
	return s
}
