package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/commands"
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
	if f, err := b.d.Tokens.Load(ctx, r.Token); err == nil {
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

// status shows one replay's progress to the requester.
func (b *Bot) status(ctx context.Context, to replyTo, id string) {
	r, err := b.d.Engine.Status(ctx, id)
	if err != nil {
		b.refuse(ctx, to, userMessage(err, id))
		return
	}
	if err := b.permit(ctx, to.user, func(g []string) error {
		return b.cfg.Policy.CheckRead(to.user, g, r.DLQ, "to see this replay")
	}); err != nil {
		b.refuse(ctx, to, userMessage(err, r.DLQ))
		return
	}
	bl, text := blocks.ProgressAs(b.cfg.CommandName, r, nil)
	b.ephemeral(ctx, to, bl, text)
}

// listSize is how many recent replays list shows.
const listSize = 20

// list shows the recent replays the requester may see.
func (b *Bot) list(ctx context.Context, to replyTo) {
	rs, err := b.d.Replays.List(ctx, listSize)
	if err != nil {
		b.refuse(ctx, to, userMessage(err, ""))
		return
	}
	var groups []string
	if p := b.cfg.Policy; p != nil && len(p.Groups()) > 0 {
		groups, _ = b.groups.GroupsOf(ctx, to.user)
	}
	var lines []string
	hidden := 0
	for _, r := range rs {
		if !b.cfg.Policy.Allowed(to.user, groups, commands.ActionRead, r.DLQ) {
			hidden++
			continue
		}
		lines = append(lines, blocks.ReplayLine(r, b.now()))
	}
	text := "*Recent replays*, newest first:\n" + strings.Join(lines, "\n")
	if len(lines) == 0 {
		text = "No replays yet. Start with `" + b.cfg.CommandName + " preview <dlq>`."
	}
	if hidden > 0 {
		text += fmt.Sprintf("\n_%d more you have no `read` permission for are not shown._", hidden)
	}
	b.say(ctx, to, text)
}

// check answers "did the replay work?".
func (b *Bot) check(ctx context.Context, to replyTo, id string) {
	r, err := b.d.Engine.Status(ctx, id)
	if err != nil {
		b.refuse(ctx, to, userMessage(err, id))
		return
	}
	if err := b.permit(ctx, to.user, func(g []string) error {
		return b.cfg.Policy.CheckRead(to.user, g, r.DLQ, "to check this replay")
	}); err != nil {
		b.refuse(ctx, to, userMessage(err, r.DLQ))
		return
	}
	rep, err := b.d.Engine.Check(ctx, id, "")
	if err != nil {
		b.refuse(ctx, to, userMessage(err, id))
		return
	}
	bl, text := blocks.Check(rep)
	b.ephemeral(ctx, to, bl, text)
}

// park moves a replay's returned copies at the park limit to the DLQ's
// parking queue (a Park button on a check report). The engine posts the
// outcome to the replay's thread and the activity channel.
func (b *Bot) park(ctx context.Context, to replyTo, id string) {
	r, err := b.d.Engine.Status(ctx, id)
	if err != nil {
		b.refuse(ctx, to, userMessage(err, id))
		return
	}
	parking := engine.ParkingQueue(r.DLQ)
	if err := b.permit(ctx, to.user, func(g []string) error {
		return b.cfg.Policy.CheckPark(to.user, g, r.DLQ, parking)
	}); err != nil {
		b.refuse(ctx, to, userMessage(err, r.DLQ))
		return
	}
	res, err := b.d.Engine.Park(ctx, id, to.user)
	if err != nil {
		b.refuse(ctx, to, userMessage(err, r.DLQ)+fmt.Sprintf(" (%d moved before it failed; the rest stay in the DLQ)", res.Parked))
		return
	}
	b.log.Info().Str("replay_id", id).Str("user", to.user).Int("parked", res.Parked).Int("failed", res.Failed).Msg("parked")
	msg := fmt.Sprintf(":parking: Moved %d message(s) of replay `%s` to `%s`.", res.Parked, id, blocks.EscapeKeepCode(res.Queue))
	if res.Failed > 0 {
		msg += fmt.Sprintf(" %d could not be moved and stay in the DLQ.", res.Failed)
	}
	if res.Duplicates > 0 {
		msg += fmt.Sprintf(" %d of those are also still in the DLQ (their originals could not be acked).", res.Duplicates)
	}
	if res.InDoubt > 0 {
		msg += fmt.Sprintf(" %d were in flight when the connection was lost: they may be in both queues (originals kept).", res.InDoubt)
	}
	b.say(ctx, to, msg)
}
