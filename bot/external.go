package bot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// UserGroups returns the (cached) source of Slack user groups, for the
// operations layer (ops.Deps.Groups): every front end checks a Slack user
// with the same groups.
func (n *Notifier) UserGroups() commands.UserGroups { return n.groups }

// ShowReplay shows in Slack a replay approved outside Slack (the HTTP API,
// an MCP client), like one approved with the button: its progress message
// is posted in the preview's thread when the preview was posted in Slack,
// else in a thread of its own in Config.APIChannel, and the replay record
// remembers where, so that every replica's progress edits, step replies
// and follow-ups go there. Without either there is no thread; the activity
// channel still gets its lines when the policy allows the DLQ there
// (showwhere.go). The approver is named as recorded
// ("api:<name>" or a mapped Slack user).
func (b *Bot) ShowReplay(ctx context.Context, r engine.Replay) error {
	var loc previewLoc
	if pm, ok := b.previews.Get(r.Token); ok {
		loc = previewLoc{channel: pm.channel, ts: pm.ts, blocks: pm.blocks}
	} else if ch, ts, err := b.d.Tokens.Message(ctx, r.Token); err == nil && ch != "" {
		loc = previewLoc{channel: ch, ts: ts}
	}
	line := fmt.Sprintf("Preview of %s approved by %s outside Slack: replay %s started.", blocks.EscapeKeepCode(r.DLQ), blocks.Who(r.Approver), r.ID)
	if loc.channel != "" && !b.showable(r.DLQ, loc.channel) {
		// The preview's channel is not allowed for the DLQ (any more): a
		// thread of its own, below, in a channel that is.
		b.log.Info().Str("replay_id", r.ID).Str("channel", loc.channel).Msg("replay not shown under its preview: the policy does not allow its DLQ there")
		loc = previewLoc{}
	}
	if loc.channel == "" {
		channel, _ := b.replayChannel(r.DLQ, b.cfg.APIChannel)
		if channel == "" {
			return nil
		}
		ts, err := b.post(ctx, requestAttempts, channel, "", nil,
			fmt.Sprintf(":robot_face: Replay %s of %d message(s) from %s approved by %s (requested by %s); its progress is in this thread.",
				r.ID, r.Total, "`"+blocks.EscapeKeepCode(r.DLQ)+"`", blocks.Who(r.Approver), blocks.Who(r.Requester)))
		if err != nil {
			return fmt.Errorf("bot: show replay %s: %w", r.ID, err)
		}
		loc = previewLoc{channel: channel, ts: ts}
	}
	pbl, ptext := blocks.ProgressAs(b.cfg.CommandName, r, nil)
	pts, err := b.post(ctx, requestAttempts, loc.channel, loc.ts, pbl, ptext)
	if err != nil {
		b.log.Warn().Err(err).Str("replay_id", r.ID).Msg("progress message could not be posted; it will be posted with the next event")
	}
	where := location{channel: loc.channel, thread: loc.ts, progress: pts}
	b.feeds.remember(r.ID, where)
	b.record(ctx, r.ID, where)
	if loc.blocks != nil && !b.feeds.showRoot(ctx, r.ID, loc.blocks, r) {
		if err := b.update(ctx, requestAttempts, loc.channel, loc.ts, blocks.Approved(loc.blocks, r.Approver, r.ID), line); err != nil {
			b.log.Warn().Err(err).Str("replay_id", r.ID).Msg("preview could not be edited")
		}
	}
	return nil
}

// ErrNoAPIChannel means a preview made outside Slack cannot be posted for
// a person to approve: no API channel is configured.
var ErrNoAPIChannel = errors.New("no channel for API previews is configured (DLQBOT_API_CHANNEL)")

// RequestApproval posts a preview made outside Slack in Config.APIChannel
// with its Approve and Discard buttons, for a person to approve (the MCP
// tools' human-approval mode), and records where, so that the replay is
// threaded under it whichever replica takes the click. p is the whole
// preview when known; else it is rendered from the frozen preview f.
func (b *Bot) RequestApproval(ctx context.Context, f engine.Frozen, p *engine.Preview) (channel, ts string, err error) {
	if b.cfg.APIChannel == "" {
		return "", "", fmt.Errorf("bot: request approval: %w", ErrNoAPIChannel)
	}
	if p == nil {
		p = previewOf(f)
	}
	bl, text := blocks.Preview(p, b.now())
	intro := fmt.Sprintf(":raising_hand: %s asks a person to approve this replay; dlqbot sends nothing until someone clicks *Approve replay*.", blocks.Who(f.Requester))
	bl = append([]slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, intro, false, false), nil, nil)}, bl...)
	ts, err = b.post(ctx, requestAttempts, b.cfg.APIChannel, "", bl, text)
	if err != nil {
		return "", "", fmt.Errorf("bot: request approval of %s: %w", audit.TokenRef(f.Token), err)
	}
	// Kept for Show samples: a reader who clicks sees the failure groups'
	// texts and every target privately, as for a preview made in Slack.
	b.previews.Put(f.Token, previewMsg{channel: b.cfg.APIChannel, ts: ts, blocks: bl, preview: p})
	if err := b.d.Tokens.SetMessage(ctx, f.Token, b.cfg.APIChannel, ts); err != nil {
		b.log.Warn().Err(err).Str("token_ref", audit.TokenRef(f.Token)).Msg("could not record where the preview was posted")
	}
	return b.cfg.APIChannel, ts, nil
}

// ApprovalChannel is where RequestApproval posts (Config.APIChannel);
// ops checks the DLQ's channel allowlist against it.
func (b *Bot) ApprovalChannel() string { return b.cfg.APIChannel }

// previewOf renders what a frozen preview knows as a preview: its DLQ,
// selection, requester, counts and targets as they were, and the targets
// whose consumers were not restarted since the failures.
func previewOf(f engine.Frozen) *engine.Preview {
	p := &engine.Preview{
		Token: f.Token, DLQ: engine.QueueInfo{Name: f.DLQ, Exists: true}, Selection: f.Selection,
		Requester: f.Requester, Selected: f.Total, Distinct: max(f.Distinct, len(f.Items)),
	}
	if !f.ExpiresAt.IsZero() {
		p.ExpiresAt = f.ExpiresAt.UTC().Format(time.RFC3339)
	}
	for _, t := range f.Targets {
		p.Targets = append(p.Targets, engine.TargetView{Queue: t.Queue, Exists: t.Exists, Consumers: t.Consumers, Messages: t.Messages,
			ConsumersSinceFailure: t.ConsumersSinceFailure})
		if t.ConsumersSinceFailure == engine.SinceUnchanged {
			// The one problem a token keeps: whoever is asked to approve
			// sees it first.
			p.Problems = append(p.Problems, engine.Problem{Kind: engine.ProblemConsumersUnchanged, Queue: t.Queue, Messages: t.Messages})
		}
	}
	return p
}
