package review

import (
	"context"
	"fmt"

	"github.com/stroma/dlqbot/engine"
)

// desire records that by wants replay id in state want, provided it is in
// one of the states from. A refusal wraps ErrNotControllable and says why;
// the returned record is the replay as it stands.
func (s *Service) desire(ctx context.Context, id, by string, want engine.State, from ...engine.State) (engine.Replay, engine.DesireResult, error) {
	res, err := s.d.Replays.DesireIf(ctx, id, want, by, from...)
	if err != nil {
		return engine.Replay{}, res, fmt.Errorf("engine: %s %s: %w", VerbOf(want), id, err)
	}
	r, err := s.d.Replays.Get(ctx, id)
	if err != nil {
		return r, res, fmt.Errorf("engine: %s %s: %w", VerbOf(want), id, err)
	}
	switch res.Refused {
	case "":
		return r, res, nil
	case engine.RefusedCancelling:
		return r, res, fmt.Errorf("engine: %s %s: %w: a cancel is pending", VerbOf(want), id, engine.ErrNotControllable)
	case engine.RefusedOwnerGone:
		return r, res, fmt.Errorf("engine: %s %s: %w: its process is gone (it was running; it will be reported interrupted)", VerbOf(want), id, engine.ErrNotControllable)
	default:
		return r, res, fmt.Errorf("engine: %s %s: %w: it is %s", VerbOf(want), id, engine.ErrNotControllable, res.State)
	}
}

// verbOf names the request for a desired state.
func VerbOf(s engine.State) string {
	switch s {
	case engine.StateRunning:
		return "resume"
	case engine.StatePaused:
		return "pause"
	case engine.StateCancelled:
		return "cancel"
	}
	return string(s)
}

// orOperator names who acted, or "an operator" when unknown.
func OrOperator(by string) string {
	if by == "" {
		return "an operator"
	}
	return by
}

// Control performs action a on replay id for by: pause, resume (handing
// the replay to a worker through Deps.Jobs; without it the caller runs it
// itself) or cancel. A replay whose state does not allow it is
// ErrNotControllable; an unknown action is ErrUnsupported.
func (s *Service) Control(ctx context.Context, id string, a engine.ControlAction, by string) (engine.Replay, error) {
	if a == engine.ControlPause || a == engine.ControlCancel {
		// A read its approval kept for a run that has not taken it: the
		// run, if any, reads afresh when it begins.
		s.DropKept(id)
	}
	switch a {
	case engine.ControlPause:
		return s.pause(ctx, id, by)
	case engine.ControlResume:
		return s.resume(ctx, id, by)
	case engine.ControlResumeResend:
		return s.resumeResend(ctx, id, by)
	case engine.ControlCancel:
		return s.cancel(ctx, id, by)
	}
	return engine.Replay{}, fmt.Errorf("engine: control %s: %w: unknown action %q", id, engine.ErrUnsupported, a)
}

// resumeResend resumes a paused or stopped replay whose ledger holds
// copies in doubt, and asks its next run to send those copies again first
// (resume resend=in-doubt): each again at least once, with its message_id,
// the x-dlqbot-copy of the copy that may have arrived and
// PossibleDuplicateHeader. A replay in another state, or with nothing in
// doubt, is ErrNotControllable and nothing changes.
func (s *Service) resumeResend(ctx context.Context, id, by string) (engine.Replay, error) {
	r, err := s.d.Replays.Get(ctx, id)
	if err != nil {
		return engine.Replay{}, fmt.Errorf("engine: resume %s resend=in-doubt: %w", id, err)
	}
	if r.State != engine.StatePaused && r.State != engine.StateStopped {
		return r, fmt.Errorf("engine: resume %s resend=in-doubt: %w: it is %s (a paused or stopped replay can resend; pause it first)", id, engine.ErrNotControllable, r.State)
	}
	_, pending, err := s.LedgerCounts(ctx, id, nil)
	if err != nil {
		return r, fmt.Errorf("engine: resume %s resend=in-doubt: ledger: %w", id, err)
	}
	if pending == 0 {
		return r, fmt.Errorf("engine: resume %s resend=in-doubt: %w: no copy of it is in doubt", id, engine.ErrNotControllable)
	}
	err = s.d.Replays.UpdateUnowned(ctx, id, func(cur *engine.Replay) error {
		if cur.State != engine.StatePaused && cur.State != engine.StateStopped {
			return fmt.Errorf("%w: it is %s", engine.ErrNotControllable, cur.State)
		}
		cur.ResendInDoubt = true
		return nil
	})
	if err != nil {
		// A held lease: a worker is still letting go of it; nothing changed.
		return r, fmt.Errorf("engine: resume %s resend=in-doubt: %w", id, err)
	}
	return s.resume(ctx, id, by)
}
