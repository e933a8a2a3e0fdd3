package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/stroma/dlqbot/engine/letter"
)

// ParkResult says what a park moved.
type ParkResult struct {
	ReplayID string `json:"replay_id"`
	Queue    string `json:"queue"`  // the parking queue
	Parked   int    `json:"parked"` // copies the broker confirmed in the parking queue
	// Duplicates are parked copies whose originals could not be acked (the
	// connection was lost): the originals are back in the DLQ as well.
	Duplicates int `json:"duplicates,omitempty"`
	// InDoubt are copies published without a confirm before the connection
	// was lost: they may or may not be in the parking queue; their
	// originals stay in the DLQ.
	InDoubt int `json:"in_doubt,omitempty"`
	Failed  int `json:"failed"` // refused by the broker (unroutable, nacked): originals left in the DLQ
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
	f, err := s.d.Tokens.LoadHeader(ctx, r.Token)
	switch {
	case err == nil && f.ParkAfter > 0:
		limit = f.ParkAfter
	case err != nil && !errors.Is(err, ErrTokenNotFound):
		// Parking by the default limit instead would move other messages.
		return ParkResult{}, fmt.Errorf("engine: park %s: %w", replayID, err)
	}
	res := ParkResult{ReplayID: r.ID, Queue: ParkingQueue(r.DLQ)}
	if err := s.d.Broker.DeclareQueue(ctx, res.Queue); err != nil {
		return res, fmt.Errorf("engine: park %s: %w", replayID, err)
	}
	mr, err := s.d.Mover.Move(ctx, MoveRequest{
		Queue: r.DLQ,
		Pick: func(m letter.Message) (Pick, bool) {
			meta := s.ParseMeta(r.DLQ, m)
			if meta.ReplayID != r.ID || !meta.Returned || meta.ReplayCount < limit {
				return Pick{}, false
			}
			return Pick{ID: meta.ID, Target: res.Queue}, true
		},
		Window: s.cfg.Window,
	})
	// Copies the broker confirmed were moved, whether or not their
	// originals could be acked; only refused copies were not.
	res.Parked = len(mr.Sent) + len(mr.Unacked)
	res.Duplicates = len(mr.Unacked)
	for _, f := range mr.Failed {
		switch f.Kind {
		case MoveLost:
			res.InDoubt++
		case MoveUnrecorded: // confirmed (park records nothing, but be exact)
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
		s.d.Notifier.Notify(ctx, Event{Kind: EventParked, Replay: r, Actor: by, At: s.d.Clock.Now(),
			Text: fmt.Sprintf("%d message(s) of replay %s moved from %s to %s%s", res.Parked, r.ID, r.DLQ, res.Queue, res.faults())})
	}
	return res, nil
}

// faults describes what did not go cleanly ("" when everything did).
func (res ParkResult) faults() string {
	s := ""
	if res.Duplicates > 0 {
		s += fmt.Sprintf("; %d of them are also still in the DLQ (their originals could not be acked)", res.Duplicates)
	}
	if res.InDoubt > 0 {
		s += fmt.Sprintf("; %d more were in flight when the connection was lost (they may be in both queues; originals kept)", res.InDoubt)
	}
	if res.Failed > 0 {
		s += fmt.Sprintf("; %d were refused by the broker and stay in the DLQ", res.Failed)
	}
	return s
}
