package engine

import (
	"context"
	"fmt"
)

// ControlAction is what an operator can ask of a replay: pause, resume or
// cancel it. Every front end (Slack, the HTTP API and MCP, the terminal)
// asks through Service.Control.
type ControlAction string

// The actions on a replay.
const (
	ControlPause  ControlAction = "pause"
	ControlResume ControlAction = "resume"
	ControlCancel ControlAction = "cancel"
)

// ParseControlAction returns the action named s; ok is false for any
// other word.
func ParseControlAction(s string) (a ControlAction, ok bool) {
	switch a := ControlAction(s); a {
	case ControlPause, ControlResume, ControlCancel:
		return a, true
	}
	return "", false
}

// Done is the action in the past tense ("paused"), for messages.
func (a ControlAction) Done() string {
	switch a {
	case ControlPause:
		return "paused"
	case ControlResume:
		return "resumed"
	case ControlCancel:
		return "cancelled"
	}
	return string(a) + "ed"
}

// Control performs action a on replay id for by: Pause, Resume (handing
// the replay to a worker through Deps.Jobs; without it the caller runs it
// itself) or Cancel. A replay whose state does not allow it is
// ErrNotControllable; an unknown action is ErrUnsupported.
func (s *Service) Control(ctx context.Context, id string, a ControlAction, by string) (Replay, error) {
	switch a {
	case ControlPause:
		return s.Pause(ctx, id, by)
	case ControlResume:
		return s.Resume(ctx, id, by)
	case ControlCancel:
		return s.Cancel(ctx, id, by)
	}
	return Replay{}, fmt.Errorf("engine: control %s: %w: unknown action %q", id, ErrUnsupported, a)
}
