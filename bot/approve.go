package bot

import (
	"context"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// approval is one request to turn a preview token into a replay: an
// Approve click (click set) or `replay <token>` (fromCommand).
type approval struct {
	to     replyTo
	token  string
	params engine.Params
	// confirmDigest is the digest of the changes an "Approve anyway"
	// click was shown (ops.Approval.ConfirmDigest).
	confirmDigest string
	fromCommand   bool
	click         *slack.InteractionCallback
}

// previewLoc is where a preview message is, and the message clicked when
// that was not the preview itself (a "what changed" reply in its thread).
type previewLoc struct {
	channel, ts   string
	blocks        []slack.Block // the preview's blocks, nil when unknown
	clickedTS     string
	clickedBlocks []slack.Block
}

// approve is the one approval path of the Approve button, "Approve
// anyway" and `replay <token>`: ops.Approve applies the policy for the
// person asking, compares the world with the preview and consumes the
// token atomically; the bot shows the new replay (its progress message in
// the preview's thread, before the replay is handed to the workers), then
// edits the preview to show the approver.
func (b *Bot) approve(ctx context.Context, a approval) {
	to := a.to
	if a.token == "" {
		b.refuse(ctx, to, "That button carries no preview token; preview again.")
		return
	}
	pm, known := b.previews.Get(a.token)
	if !known {
		// Posted by another replica: thread under it (its blocks are not
		// known here, so it is not edited).
		if ch, ts, err := b.d.Tokens.Message(ctx, a.token); err == nil && ch != "" {
			pm, known = previewMsg{channel: ch, ts: ts}, true
		}
	}
	params := a.params
	if !a.fromCommand && known && pm.params != nil {
		params = *pm.params
	}
	loc := locate(a, pm, known)
	var moved string // where the replay is shown instead, when it moved
	out, err := b.d.Ops.Approve(ctx, ops.SlackCaller(to.user), ops.Approval{Token: a.token, Params: params, ConfirmDigest: a.confirmDigest,
		Show: func(ctx context.Context, r engine.Replay) { moved = b.show(ctx, a, loc, r) }})
	if r, ok := ops.IsRefusal(err); ok && r.Code == ops.Changed {
		b.changed(ctx, a, loc, params, r.Changes)
		return
	}
	if err != nil {
		b.refuse(ctx, to, userMessage(err, out.Frozen.DLQ))
		return
	}
	if out.HandOffErr != nil {
		r := out.Replay
		b.refuse(ctx, a.to, fmt.Sprintf("Replay `%s` was approved but could not be handed to a worker (%v). Nothing was sent: cancel it with `%s cancel %s` and approve a new preview.",
			r.ID, out.HandOffErr, b.cfg.CommandName, r.ID))
		return
	}
	b.started(ctx, a, loc, out.Replay, moved)
}

// locate finds the preview message of an approval.
func locate(a approval, pm previewMsg, known bool) previewLoc {
	var loc previewLoc
	if known {
		loc = previewLoc{channel: pm.channel, ts: pm.ts, blocks: pm.blocks}
	}
	cb := a.click
	if cb == nil || cb.Container.IsEphemeral {
		return loc
	}
	channel := firstNonEmpty(cb.Container.ChannelID, cb.Channel.ID)
	msgTS := firstNonEmpty(cb.Container.MessageTs, cb.Message.Timestamp)
	thread := firstNonEmpty(cb.Container.ThreadTs, cb.Message.ThreadTimestamp)
	if channel == "" || msgTS == "" {
		return loc
	}
	if thread != "" && thread != msgTS {
		// A reply in the preview's thread ("what changed").
		if loc.ts != thread {
			loc = previewLoc{channel: channel, ts: thread}
		}
		loc.clickedTS, loc.clickedBlocks = msgTS, cb.Message.Blocks.BlockSet
		return loc
	}
	return previewLoc{channel: channel, ts: msgTS, blocks: cb.Message.Blocks.BlockSet}
}

// changed shows what changed since the preview and asks again; nothing
// was sent. It goes in the preview's thread when that is known, else to
// the approver alone.
func (b *Bot) changed(ctx context.Context, a approval, loc previewLoc, params engine.Params, changes []engine.Change) {
	b.log.Info().Str("token_ref", audit.TokenRef(a.token)).Str("user", a.to.user).Int("changes", len(changes)).Msg("approval asks again: the world changed")
	if a.fromCommand {
		b.previews.Update(a.token, func(pm previewMsg) previewMsg { pm.params = &params; return pm })
	}
	bl, text := blocks.Changes(changes, a.token)
	if loc.channel != "" && loc.ts != "" {
		if _, err := b.post(ctx, requestAttempts, loc.channel, loc.ts, bl, text); err == nil {
			if a.fromCommand {
				b.say(ctx, a.to, ":warning: The DLQ or its targets changed since the preview. What changed is in the preview's thread, with *Approve anyway* and *Discard*. Nothing was sent.")
			}
			return
		}
	}
	b.ephemeral(ctx, a.to, bl, text)
}

// show posts and records a new replay's progress message, before the
// replay is handed to the workers (so their first edit finds it). A
// channel the policy does not allow for the DLQ is not used: the replay
// shows in the activity channel instead (or nowhere), and show returns
// the note that tells the approver where.
func (b *Bot) show(ctx context.Context, a approval, loc previewLoc, r engine.Replay) (moved string) {
	log := b.log.With().Str("replay_id", r.ID).Str("approver", a.to.user).Logger()
	channel, thread := loc.channel, loc.ts
	if channel == "" {
		channel = a.to.channel
	}
	if to, ok := b.replayChannel(r.DLQ, channel); ok {
		log.Info().Str("channel", channel).Str("shown_in", to).Msg("replay not shown where it was approved: the policy does not allow its DLQ there")
		moved = movedNote(r.DLQ, channel, to)
		channel, thread = to, ""
		if channel == "" {
			return moved
		}
	}
	pbl, ptext := blocks.ProgressAs(b.cfg.CommandName, r, nil)
	pts, err := b.post(ctx, requestAttempts, channel, thread, pbl, ptext)
	if err != nil {
		log.Warn().Err(err).Msg("progress message could not be posted; it will be posted with the next event")
	}
	if thread == "" {
		thread = pts
	}
	where := location{channel: channel, thread: thread, progress: pts}
	b.feeds.remember(r.ID, where)
	b.record(ctx, r.ID, where)
	return moved
}

// started edits the preview to show who approved the replay now handed
// to the workers, and answers a command.
func (b *Bot) started(ctx context.Context, a approval, loc previewLoc, r engine.Replay, moved string) {
	user := a.to.user
	log := b.log.With().Str("replay_id", r.ID).Str("approver", user).Logger()
	line := fmt.Sprintf("Preview of %s approved by %s: replay %s started.", blocks.EscapeKeepCode(r.DLQ), blocks.Who(user), r.ID)
	// The preview leads with the replay's status from now on (outcome.go),
	// unless the replay shows elsewhere.
	if loc.blocks != nil && (moved != "" || !b.feeds.showRoot(ctx, r.ID, loc.blocks, r)) {
		if err := b.update(ctx, requestAttempts, loc.channel, loc.ts, blocks.Approved(loc.blocks, user, r.ID), line); err != nil {
			log.Warn().Err(err).Msg("preview could not be edited")
		}
	}
	if loc.clickedTS != "" {
		if err := b.update(ctx, requestAttempts, loc.channel, loc.clickedTS, blocks.Approved(loc.clickedBlocks, user, r.ID), line); err != nil {
			log.Warn().Err(err).Msg("approval message could not be edited")
		}
	}
	switch {
	case moved != "":
		b.say(ctx, a.to, fmt.Sprintf(":arrow_forward: Replay `%s` of %d message(s) from `%s` is starting in canary steps. %s",
			r.ID, r.Total, blocks.EscapeKeepCode(r.DLQ), moved))
	case a.fromCommand:
		b.say(ctx, a.to, fmt.Sprintf(":arrow_forward: Replay `%s` of %d message(s) from `%s` is starting in canary steps; its progress is in the thread of the preview.",
			r.ID, r.Total, blocks.EscapeKeepCode(r.DLQ)))
	}
}

// discard drops an unused preview token (ops.Discard: the requester may
// always, anyone else needs `replay` on the DLQ) and edits the clicked
// message to say who discarded it.
func (b *Bot) discard(ctx context.Context, to replyTo, token string, cb slack.InteractionCallback) {
	f, err := b.d.Ops.Discard(ctx, ops.SlackCaller(to.user), token)
	if r, ok := ops.IsRefusal(err); ok && r.Code == ops.TokenExpired {
		b.refuse(ctx, to, "That preview was already discarded or has expired; nothing to do.")
		return
	}
	if err != nil {
		b.refuse(ctx, to, userMessage(err, f.DLQ))
		return
	}
	line := fmt.Sprintf("Preview of %s discarded by %s; nothing was replayed.", blocks.EscapeKeepCode(f.DLQ), blocks.Who(to.user))
	pm, known := b.previews.Get(token)
	loc := locate(approval{click: &cb}, pm, known)
	if loc.blocks != nil {
		if err := b.update(ctx, requestAttempts, loc.channel, loc.ts, blocks.Discarded(loc.blocks, to.user), line); err != nil {
			b.log.Warn().Err(err).Msg("preview could not be edited")
		}
	}
	if loc.clickedTS != "" {
		if err := b.update(ctx, requestAttempts, loc.channel, loc.clickedTS, blocks.Discarded(loc.clickedBlocks, to.user), line); err != nil {
			b.log.Warn().Err(err).Msg("message could not be edited")
		}
	}
}
