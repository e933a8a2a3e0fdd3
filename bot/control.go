package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/stroma/dlqbot/engine"
)

// control pauses, resumes or cancels a replay for a command or a click on
// the progress message. The progress message shows the result when the
// engine reports it; a click on success says nothing more.
func (b *Bot) control(ctx context.Context, to replyTo, action engine.ControlAction, id string, click bool) {
	r, err := b.d.Engine.Status(ctx, id)
	if err != nil {
		b.refuse(ctx, to, userMessage(err, id))
		return
	}
	var targets []string
	if f, err := b.d.Tokens.LoadHeader(ctx, r.Token); err == nil {
		targets = f.TargetQueues()
	} else if action == engine.ControlResume {
		b.refuse(ctx, to, fmt.Sprintf("Replay `%s` cannot be resumed: its preview can no longer be read (%v).", id, err))
		return
	}
	if err := b.permit(ctx, to.user, func(g []string) error {
		return b.cfg.Policy.CheckControl(to.user, g, string(action), r.DLQ, targets)
	}); err != nil {
		b.refuse(ctx, to, userMessage(err, r.DLQ))
		return
	}
	after, err := b.d.Engine.Control(ctx, id, action, to.user)
	if errors.Is(err, engine.ErrNotControllable) {
		// The engine's record is the state that decided the refusal.
		now := r.State
		if after.State != "" {
			now = after.State
		}
		msg := fmt.Sprintf("Replay `%s` is %s, so it cannot be %s.", id, now, action.Done())
		if _, why, ok := strings.Cut(err.Error(), engine.ErrNotControllable.Error()+": "); ok && !strings.HasPrefix(why, "it is ") {
			msg = fmt.Sprintf("Replay `%s` cannot be %s: %s.", id, action.Done(), why)
		}
		b.refuse(ctx, to, msg)
		return
	}
	if err != nil {
		b.refuse(ctx, to, userMessage(err, id))
		return
	}
	b.log.Info().Str("replay_id", id).Str("user", to.user).Str("verb", string(action)).Str("state", string(after.State)).Msg("control requested")
	if !click {
		b.say(ctx, to, fmt.Sprintf("%s requested for replay `%s` (it is %s now); it takes effect within a second and the progress message will show it.",
			upperFirst(string(action)), id, after.State))
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
