package bot

import (
	"context"
	"fmt"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/engine"
)

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
