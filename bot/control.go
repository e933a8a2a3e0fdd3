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
func (b *Bot) control(ctx context.Context, to replyTo, verb, id string, click bool) {
	r, err := b.d.Engine.Status(ctx, id)
	if err != nil {
		b.refuse(ctx, to, userMessage(err, id))
		return
	}
	var targets []string
	if f, err := b.d.Tokens.Load(ctx, r.Token); err == nil {
		targets = f.TargetQueues()
	} else if verb == "resume" {
		b.refuse(ctx, to, fmt.Sprintf("Replay `%s` cannot be resumed: its preview can no longer be read (%v).", id, err))
		return
	}
	if err := b.permit(ctx, to.user, func(g []string) error {
		return b.cfg.Policy.CheckControl(to.user, g, verb, r.DLQ, targets)
	}); err != nil {
		b.refuse(ctx, to, userMessage(err, r.DLQ))
		return
	}
	var after engine.Replay
	switch verb {
	case "pause":
		after, err = b.d.Engine.Pause(ctx, id, to.user)
	case "resume":
		after, err = b.d.Engine.Resume(ctx, id, to.user, b.d.Jobs)
	case "cancel":
		after, err = b.d.Engine.Cancel(ctx, id, to.user)
	}
	if errors.Is(err, engine.ErrNotControllable) {
		// The engine's record is the state that decided the refusal.
		now := r.State
		if after.State != "" {
			now = after.State
		}
		msg := fmt.Sprintf("Replay `%s` is %s, so it cannot be %s.", id, now, pastTense(verb))
		if _, why, ok := strings.Cut(err.Error(), engine.ErrNotControllable.Error()+": "); ok && !strings.HasPrefix(why, "it is ") {
			msg = fmt.Sprintf("Replay `%s` cannot be %s: %s.", id, pastTense(verb), why)
		}
		b.refuse(ctx, to, msg)
		return
	}
	if err != nil {
		b.refuse(ctx, to, userMessage(err, id))
		return
	}
	b.log.Info().Str("replay_id", id).Str("user", to.user).Str("verb", verb).Str("state", string(after.State)).Msg("control requested")
	if !click {
		b.say(ctx, to, fmt.Sprintf("%s requested for replay `%s` (it is %s now); it takes effect within a second and the progress message will show it.",
			upperFirst(verb), id, after.State))
	}
}

func pastTense(verb string) string {
	switch verb {
	case "pause":
		return "paused"
	case "resume":
		return "resumed"
	case "cancel":
		return "cancelled"
	}
	return verb + "ed"
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
