package engine

import (
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

// Errors that end a run early.
var (
	// ErrPauseRequested means an operator paused the replay.
	ErrPauseRequested = errors.New("pause requested")
	// ErrCancelRequested means an operator cancelled the replay.
	ErrCancelRequested = errors.New("cancel requested")
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
