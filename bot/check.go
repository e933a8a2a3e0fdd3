package bot

import (
	"context"
	"fmt"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/ops"
)

// check answers "did the replay work?" (ops.Check).
func (b *Bot) check(ctx context.Context, to replyTo, id string) {
	rep, err := b.d.Ops.Check(ctx, ops.SlackCaller(to.user), id)
	if err != nil {
		b.refuse(ctx, to, userMessage(err, id))
		return
	}
	// An ephemeral answer to a reader (ops.Check checked read): the
	// private view, with the failure groups' texts.
	bl, text := blocks.Check(rep, blocks.PrivateView)
	b.ephemeral(ctx, to, bl, text)
}

// park moves a replay's returned copies at the park limit to the DLQ's
// parking queue (a Park button on a check report; ops.Park). The engine
// posts the outcome to the replay's thread and the activity channel.
func (b *Bot) park(ctx context.Context, to replyTo, id string) {
	res, err := b.d.Ops.Park(ctx, ops.SlackCaller(to.user), id)
	if err != nil {
		msg := userMessage(err, id)
		if _, refused := ops.IsRefusal(err); !refused {
			msg += fmt.Sprintf(" (%d moved before it failed; the rest stay in the DLQ)", res.Parked)
		}
		b.refuse(ctx, to, msg)
		return
	}
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
