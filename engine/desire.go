package engine

import (
	"context"
	"errors"
	"fmt"
)

// ErrDesireChanged means an operator asked for another state after the
// owner decided what to write: the owner's write was refused and it must
// act on the new desire instead (a resume that came in while it paused).
var ErrDesireChanged = errors.New("the desired state changed")

// ErrNotRunnable means a worker was handed a replay that nobody wants run
// now (a duplicate or stale job): it is paused or stopped and no resume is
// pending, or it is running without an owner (the reaper reports it).
var ErrNotRunnable = errors.New("replay is not to be run")

// Why a conditional desire was refused.
const (
	// RefusedState means the replay's state does not allow the request.
	RefusedState = "state"
	// RefusedCancelling means a cancel is pending: only a cancel may follow.
	RefusedCancelling = "cancelling"
	// RefusedOwnerGone means the replay is running but nobody holds its
	// lease: the reaper reports it interrupted.
	RefusedOwnerGone = "owner_gone"
)

// DesireResult is what a conditional desire found and did.
type DesireResult struct {
	// Recorded is true when the desired state was written.
	Recorded bool
	// Refused says why it was not (one of the Refused… constants).
	Refused string
	// State is the replay's state when the request was decided.
	State State
	// Desired is the desired state before the request ("" when none).
	Desired State
	// Owned is true when a process held the replay's lease.
	Owned bool
}

// desire records that by wants replay id in state want, provided it is in
// one of the states from. A refusal wraps ErrNotControllable and says why;
// the returned record is the replay as it stands.
func (s *Service) desire(ctx context.Context, id, by string, want State, from ...State) (Replay, DesireResult, error) {
	res, err := s.d.Replays.DesireIf(ctx, id, want, by, from...)
	if err != nil {
		return Replay{}, res, fmt.Errorf("engine: %s %s: %w", verbOf(want), id, err)
	}
	r, err := s.d.Replays.Get(ctx, id)
	if err != nil {
		return r, res, fmt.Errorf("engine: %s %s: %w", verbOf(want), id, err)
	}
	switch res.Refused {
	case "":
		return r, res, nil
	case RefusedCancelling:
		return r, res, fmt.Errorf("engine: %s %s: %w: a cancel is pending", verbOf(want), id, ErrNotControllable)
	case RefusedOwnerGone:
		return r, res, fmt.Errorf("engine: %s %s: %w: its process is gone (it was running; it will be reported interrupted)", verbOf(want), id, ErrNotControllable)
	default:
		return r, res, fmt.Errorf("engine: %s %s: %w: it is %s", verbOf(want), id, ErrNotControllable, res.State)
	}
}

// verbOf names the request for a desired state.
func verbOf(s State) string {
	switch s {
	case StateRunning:
		return "resume"
	case StatePaused:
		return "pause"
	case StateCancelled:
		return "cancel"
	}
	return string(s)
}
