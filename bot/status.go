package bot

import (
	"context"
	"fmt"
	"strings"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/ops"
)

// status shows one replay's progress to the requester (ops.Replay).
func (b *Bot) status(ctx context.Context, to replyTo, id string) {
	r, err := b.d.Ops.Replay(ctx, ops.SlackCaller(to.user), id)
	if err != nil {
		b.refuse(ctx, to, userMessage(err, id))
		return
	}
	bl, text := blocks.ProgressAs(b.cfg.CommandName, r, nil)
	b.ephemeral(ctx, to, bl, text)
}

// list shows the recent replays the requester may see (ops.List).
func (b *Bot) list(ctx context.Context, to replyTo) {
	rs, hidden, err := b.d.Ops.List(ctx, ops.SlackCaller(to.user), 0)
	if err != nil {
		b.refuse(ctx, to, userMessage(err, ""))
		return
	}
	var lines []string
	for _, r := range rs {
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
