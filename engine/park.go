package engine

import (
	"context"
	"errors"
	"fmt"
)

// ParkResult says what a park moved.
type ParkResult struct {
	ReplayID string `json:"replay_id"`
	Queue    string `json:"queue"`  // the parking queue
	Parked   int    `json:"parked"` // messages moved there
	Failed   int    `json:"failed"` // picked but left in the DLQ
}

// ParkingQueue is the default parking queue of a DLQ.
func ParkingQueue(dlq string) string { return dlq + ".parking" }

// Park moves the replay's returned copies that are at or over the park
// limit from the DLQ to its parking queue (declared if missing), unchanged
// and with the same confirm-then-ack safety as a replay.
func (s *Service) Park(ctx context.Context, replayID, by string) (ParkResult, error) {
	r, err := s.d.Replays.Get(ctx, replayID)
	if err != nil {
		return ParkResult{}, fmt.Errorf("engine: park %s: %w", replayID, err)
	}
	limit := DefaultParkAfter
	if f, err := s.d.Tokens.Load(ctx, r.Token); err == nil && f.ParkAfter > 0 {
		limit = f.ParkAfter
	}
	res := ParkResult{ReplayID: r.ID, Queue: ParkingQueue(r.DLQ)}
	decl, ok := s.d.Broker.(Declarer)
	if !ok || s.d.Mover == nil {
		return res, errors.New("engine: park: the broker cannot declare queues or move messages")
	}
	if err := decl.DeclareQueue(ctx, res.Queue); err != nil {
		return res, fmt.Errorf("engine: park %s: %w", replayID, err)
	}
	mr, err := s.d.Mover.Move(ctx, MoveRequest{
		Queue: r.DLQ,
		Pick: func(m Message) (Pick, bool) {
			meta := s.ParseMeta(r.DLQ, m)
			if meta.ReplayID != r.ID || !meta.Returned || meta.ReplayCount < limit {
				return Pick{}, false
			}
			return Pick{ID: meta.ID, Target: res.Queue}, true
		},
		Window: s.cfg.Window,
	})
	res.Parked = len(mr.Sent)
	res.Failed = len(mr.Failed) + len(mr.Unacked)
	if err != nil {
		return res, fmt.Errorf("engine: park %s: %w", replayID, err)
	}
	if s.d.Notifier != nil {
		s.d.Notifier.Notify(ctx, Event{Kind: EventParked, Replay: r, Actor: by, At: s.d.Clock.Now(),
			Text: fmt.Sprintf("%d message(s) of replay %s moved from %s to %s", res.Parked, r.ID, r.DLQ, res.Queue)})
	}
	return res, nil
}
