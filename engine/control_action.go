package engine

import (
	"context"
	"errors"
	"fmt"
)

// ControlAction is what an operator can ask of a replay: pause, resume or
// cancel it. Every front end (Slack, the HTTP API and MCP, the terminal)
// asks through Service.Control.
type ControlAction string

// The actions on a replay. ControlResumeResend is resume with its one
// parameter, resend=in-doubt: the copies in doubt are sent again first.
const (
	ControlPause        ControlAction = "pause"
	ControlResume       ControlAction = "resume"
	ControlCancel       ControlAction = "cancel"
	ControlResumeResend ControlAction = "resume resend=in-doubt"
)

// ResendInDoubt is the value of resume's resend parameter
// (resend=in-doubt), the only one it takes.
const ResendInDoubt = "in-doubt"

// ErrBadResend means resume's resend parameter has a value other than
// ResendInDoubt.
var ErrBadResend = errors.New(`resend takes one value: "in-doubt"`)

// ParseControlAction returns the action named s ("resume resend=in-doubt"
// included); ok is false for any other text.
func ParseControlAction(s string) (a ControlAction, ok bool) {
	switch a := ControlAction(s); a {
	case ControlPause, ControlResume, ControlCancel, ControlResumeResend:
		return a, true
	}
	return "", false
}

// WithResend returns the variant of a that resend names: a itself when
// resend is "", ControlResumeResend for resume with resend "in-doubt".
// Any other value, or resend on an action other than resume, is
// ErrBadResend.
func (a ControlAction) WithResend(resend string) (ControlAction, error) {
	switch {
	case resend == "":
		return a, nil
	case resend != ResendInDoubt:
		return "", fmt.Errorf("resend=%s: %w", resend, ErrBadResend)
	case a != ControlResume && a != ControlResumeResend:
		return "", fmt.Errorf("%s: %w (it is a parameter of resume only)", a, ErrBadResend)
	}
	return ControlResumeResend, nil
}

// Verb is the action's command word ("resume" for both resumes).
func (a ControlAction) Verb() ControlAction {
	if a == ControlResumeResend {
		return ControlResume
	}
	return a
}

// Done is the action in the past tense ("paused"), for messages.
func (a ControlAction) Done() string {
	switch a {
	case ControlPause:
		return "paused"
	case ControlResume:
		return "resumed"
	case ControlResumeResend:
		return "resumed, sending the copies in doubt again first"
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
	case ControlResumeResend:
		return s.ResumeResend(ctx, id, by)
	case ControlCancel:
		return s.Cancel(ctx, id, by)
	}
	return Replay{}, fmt.Errorf("engine: control %s: %w: unknown action %q", id, ErrUnsupported, a)
}
