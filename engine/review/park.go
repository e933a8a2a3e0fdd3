package review

import (
	"context"
	"errors"
	"fmt"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
)

// Park moves the replay's returned copies that are at or over the park
// limit from the DLQ to its parking queue (declared if missing), unchanged
// and with the same confirm-then-ack safety as a replay.
func (s *Service) Park(ctx context.Context, replayID, by string) (engine.ParkResult, error) {
	r, err := s.d.Replays.Get(ctx, replayID)
	if err != nil {
		return engine.ParkResult{}, fmt.Errorf("engine: park %s: %w", replayID, err)
	}
	limit := engine.DefaultParkAfter
	f, err := s.d.Tokens.LoadHeader(ctx, r.Token)
	switch {
	case err == nil && f.ParkAfter > 0:
		limit = f.ParkAfter
	case err != nil && !errors.Is(err, engine.ErrTokenNotFound):
		// Parking by the default limit instead would move other messages.
		return engine.ParkResult{}, fmt.Errorf("engine: park %s: %w", replayID, err)
	}
	res := engine.ParkResult{ReplayID: r.ID, Queue: engine.ParkingQueue(r.DLQ)}
	if err := s.d.Broker.DeclareQueue(ctx, res.Queue); err != nil {
		return res, fmt.Errorf("engine: park %s: %w", replayID, err)
	}
	mr, err := s.d.Mover.Move(ctx, engine.MoveRequest{
		Queue: r.DLQ,
		Pick: func(m letter.Message) (engine.Pick, bool) {
			meta := s.ParseMeta(r.DLQ, m)
			if meta.ReplayID != r.ID || !meta.Returned || meta.ReplayCount < limit {
				return engine.Pick{}, false
			}
			return engine.Pick{ID: meta.ID, Target: res.Queue}, true
		},
		Window: s.cfg.Tune.Window,
	})
	// Copies the broker confirmed were moved, whether or not their
	// originals could be acked; only refused copies were not.
	res.Parked = len(mr.Sent) + len(mr.Unacked)
	res.Duplicates = len(mr.Unacked)
	for _, f := range mr.Failed {
		switch f.Kind {
		case engine.MoveLost:
			res.InDoubt++
		case engine.MoveUnrecorded: // confirmed (park records nothing, but be exact)
			res.Parked++
			res.Duplicates++
		default:
			res.Failed++
		}
	}
	if err != nil {
		return res, fmt.Errorf("engine: park %s: %w", replayID, err)
	}
	if s.d.Notifier != nil {
		s.d.Notifier.Notify(ctx, engine.Event{Kind: engine.EventParked, Replay: r, Actor: by, At: s.d.Clock.Now(),
			Text: fmt.Sprintf("%d message(s) of replay %s moved from %s to %s%s", res.Parked, r.ID, r.DLQ, res.Queue, res.Faults())})
	}
	return res, nil
}
