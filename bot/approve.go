package bot

import (
	"context"
	"errors"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/redact"
)

// approval is one request to turn a preview token into a replay: an
// Approve click (click set) or `replay <token>` (fromCommand).
type approval struct {
	to          replyTo
	token       string
	params      engine.Params
	confirmed   bool
	fromCommand bool
	click       *slack.InteractionCallback
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
// anyway" and `replay <token>`: permission check for the person asking,
// engine.Approve (which compares the world with the preview and consumes
// the token atomically), then the preview edited to show the approver,
// the progress message posted in its thread, the replay record annotated
// with where that is, and the replay handed to the workers.
func (b *Bot) approve(ctx context.Context, a approval) {
	to := a.to
	if a.token == "" {
		b.refuse(ctx, to, "That button carries no preview token; preview again.")
		return
	}
	f, err := b.d.Tokens.Load(ctx, a.token)
	if err != nil {
		b.refuse(ctx, to, userMessage(err, a.token))
		return
	}
	targets := f.TargetQueues()
	if err := b.permit(ctx, to.user, func(g []string) error {
		return b.cfg.Policy.CheckApprove(to.user, g, f.DLQ, targets, f.Requester, f.Total)
	}); err != nil {
		b.refuse(ctx, to, userMessage(err, f.DLQ))
		return
	}
	pm, known := b.previews.get(a.token)
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
	ap, err := b.d.Engine.Approve(ctx, a.token, to.user, params, a.confirmed)
	if errors.Is(err, engine.ErrChanged) {
		b.changed(ctx, a, loc, params, ap.Changes)
		return
	}
	if err != nil {
		b.log.Info().Str("error", redact.Tokens(err.Error())).Str("token", audit.TokenRef(a.token)).Str("user", to.user).Msg("approval refused")
		b.refuse(ctx, to, userMessage(err, f.DLQ))
		return
	}
	b.started(ctx, a, loc, ap.Replay)
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
	b.log.Info().Str("token", audit.TokenRef(a.token)).Str("user", a.to.user).Int("changes", len(changes)).Msg("approval asks again: the world changed")
	if a.fromCommand {
		b.previews.setParams(a.token, params)
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

// started posts and records a new replay's progress message, hands the
// replay to the workers and edits the preview to show who approved it.
func (b *Bot) started(ctx context.Context, a approval, loc previewLoc, r engine.Replay) {
	user := a.to.user
	log := b.log.With().Str("replay_id", r.ID).Str("token", audit.TokenRef(a.token)).Str("approver", user).Logger()
	channel, thread := loc.channel, loc.ts
	if channel == "" {
		channel = a.to.channel
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
	if err := b.d.Engine.Enqueue(ctx, r.ID); err != nil {
		log.Error().Err(err).Msg("replay approved but not handed to a worker")
		b.refuse(ctx, a.to, fmt.Sprintf("Replay `%s` was approved but could not be handed to a worker (%v). Nothing was sent: cancel it with `%s cancel %s` and approve a new preview.",
			r.ID, err, b.cfg.CommandName, r.ID))
		return
	}
	log.Info().Str("dlq", r.DLQ).Int("total", r.Total).Msg("replay approved and queued")
	line := fmt.Sprintf("Preview of %s approved by %s: replay %s started.", blocks.EscapeKeepCode(r.DLQ), blocks.Who(user), r.ID)
	if loc.blocks != nil {
		if err := b.update(ctx, requestAttempts, loc.channel, loc.ts, blocks.Approved(loc.blocks, user, r.ID), line); err != nil {
			log.Warn().Err(err).Msg("preview could not be edited")
		}
	}
	if loc.clickedTS != "" {
		if err := b.update(ctx, requestAttempts, loc.channel, loc.clickedTS, blocks.Approved(loc.clickedBlocks, user, r.ID), line); err != nil {
			log.Warn().Err(err).Msg("approval message could not be edited")
		}
	}
	if a.fromCommand {
		b.say(ctx, a.to, fmt.Sprintf(":arrow_forward: Replay `%s` of %d message(s) from `%s` is starting in canary steps; its progress is in the thread of the preview.",
			r.ID, r.Total, blocks.EscapeKeepCode(r.DLQ)))
	}
}

// discard drops an unused preview token and edits the clicked message to
// say who discarded it. The requester may always discard their preview;
// anyone else needs `replay` on the DLQ.
func (b *Bot) discard(ctx context.Context, to replyTo, token string, cb slack.InteractionCallback) {
	f, err := b.d.Tokens.Load(ctx, token)
	if err != nil {
		b.refuse(ctx, to, "That preview was already discarded or has expired; nothing to do.")
		return
	}
	if to.user != f.Requester {
		if err := b.permit(ctx, to.user, func(g []string) error {
			return b.cfg.Policy.Require(to.user, g, "to discard someone else's preview",
				commands.Need{Action: commands.ActionReplay, Queues: []string{f.DLQ}})
		}); err != nil {
			b.refuse(ctx, to, userMessage(err, f.DLQ))
			return
		}
	}
	if err := b.d.Tokens.Discard(ctx, token); err != nil {
		if errors.Is(err, engine.ErrTokenUsed) {
			b.refuse(ctx, to, "That preview was already approved, so it cannot be discarded; pause or cancel its replay instead.")
			return
		}
		b.refuse(ctx, to, userMessage(err, f.DLQ))
		return
	}
	b.log.Info().Str("token", audit.TokenRef(token)).Str("user", to.user).Str("dlq", f.DLQ).Msg("preview discarded")
	line := fmt.Sprintf("Preview of %s discarded by %s; nothing was replayed.", blocks.EscapeKeepCode(f.DLQ), blocks.Who(to.user))
	pm, known := b.previews.get(token)
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
