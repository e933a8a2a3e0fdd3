package bot

import (
	"context"
	"fmt"
	"strings"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/commands"
)

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
