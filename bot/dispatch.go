package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/redact"
)

// requestKind tells a slash command from a button click.
type requestKind int

const (
	kindCommand requestKind = iota + 1
	kindAction
)

// request is one request from Slack, whichever transport brought it.
type request struct {
	kind requestKind
	cmd  slack.SlashCommand
	cb   slack.InteractionCallback
	via  string // "http" or "socket"
}

// ackReply is an immediate answer to a slash command, sent in the ack.
type ackReply struct {
	ResponseType string `json:"response_type"`
	Text         string `json:"text"`
}

func ephemeralAck(text string) *ackReply {
	return &ackReply{ResponseType: slack.ResponseTypeEphemeral, Text: text}
}

// validCommand checks that a slash command has what the bot needs.
func validCommand(c slack.SlashCommand) error {
	switch {
	case c.Command == "":
		return errors.New("no command")
	case c.UserID == "":
		return errors.New("no user_id")
	case c.ChannelID == "":
		return errors.New("no channel_id")
	}
	return nil
}

// validAction checks that an interaction is a block_actions click the bot
// can act on.
func validAction(cb slack.InteractionCallback) error {
	switch {
	case cb.Type == "":
		return errors.New("no type")
	case cb.Type != slack.InteractionTypeBlockActions:
		return nil // other kinds are acked and ignored
	case cb.User.ID == "":
		return errors.New("no user")
	case len(cb.ActionCallback.BlockActions) == 0 || cb.ActionCallback.BlockActions[0] == nil:
		return errors.New("no action")
	case cb.ActionCallback.BlockActions[0].ActionID == "":
		return errors.New("no action_id")
	}
	return nil
}

// dispatch is the one entry point of both transports. It does only what
// is instant — parsing the command — and hands the rest to a goroutine; it
// returns the slash command's immediate reply, if any.
func (b *Bot) dispatch(req request) *ackReply {
	if msg := b.foreign(req); msg != "" {
		if req.kind == kindCommand {
			return ephemeralAck(msg)
		}
		return nil
	}
	switch req.kind {
	case kindCommand:
		return b.dispatchCommand(req)
	case kindAction:
		b.dispatchAction(req)
	}
	return nil
}

// foreign checks a request's workspace (team_id) and app (api_app_id)
// against Config.TeamID and Config.AppID, when they are set, and returns
// the refusal for a request from elsewhere ("" when it may be served).
// A refused request changes nothing.
func (b *Bot) foreign(req request) string {
	team, app, user := req.cmd.TeamID, req.cmd.APIAppID, req.cmd.UserID
	if req.kind == kindAction {
		team, app, user = req.cb.Team.ID, req.cb.APIAppID, req.cb.User.ID
	}
	var why string
	switch {
	case b.cfg.TeamID != "" && team != b.cfg.TeamID:
		why = "team"
	case b.cfg.AppID != "" && app != b.cfg.AppID:
		why = "app"
	default:
		return ""
	}
	b.log.Warn().Str("via", req.via).Str("mismatch", why).Str("team_id", team).Str("api_app_id", app).Str("user", user).
		Msg("slack request refused: from another workspace or app")
	b.d.Ops.RecordAccess(context.Background(), "slack", user, audit.OpSlackRequest, "foreign_"+why,
		fmt.Sprintf("from workspace %q, app %q", team, app))
	return "This dlqbot serves another Slack workspace or app, so it does not act on this request; nothing was done."
}

func (b *Bot) dispatchCommand(req request) *ackReply {
	c := req.cmd
	to := replyTo{user: c.UserID, channel: c.ChannelID, responseURL: c.ResponseURL}
	log := b.log.With().Str("user", c.UserID).Str("channel", c.ChannelID).Str("via", req.via).Logger()
	prefix := b.cfg.CommandName
	if strings.HasPrefix(c.Command, "/") {
		prefix = c.Command // replies show the command as the user typed it
	}
	res := commands.ParseAs(prefix, commands.UnescapeSlack(c.Text), b.now())
	if res.Cmd == nil {
		log.Info().Str("text", redact.Tokens(c.Text)).Str("reply", res.Reply).Msg("command refused: user mistake")
		return ephemeralAck(res.Reply)
	}
	log.Info().Str("command", redact.Tokens(res.Cmd.String())).Msg("command")
	if h, ok := res.Cmd.(commands.HelpCmd); ok {
		return ephemeralAck(commands.HelpAs(prefix, h.Topic, b.AccessControl()))
	}
	if !b.start(func(ctx context.Context) { b.runCommand(ctx, to, res.Cmd) }) {
		log.Warn().Msg("command refused: too many requests in flight")
		return ephemeralAck(blocks.Ephemeral("dlqbot is busy with other requests right now; nothing was done. Try again in a minute."))
	}
	if p, ok := res.Cmd.(commands.PreviewCmd); ok {
		return ephemeralAck(fmt.Sprintf(":mag: Previewing `%s` — reading the DLQ changes nothing. The preview will be posted in this channel.", blocks.EscapeKeepCode(p.Selection.DLQ)))
	}
	return nil
}

func (b *Bot) dispatchAction(req request) {
	cb := req.cb
	if cb.Type != slack.InteractionTypeBlockActions {
		b.log.Debug().Str("type", string(cb.Type)).Msg("interaction ignored")
		return
	}
	act := *cb.ActionCallback.BlockActions[0]
	to := replyTo{user: cb.User.ID, channel: firstNonEmpty(cb.Channel.ID, cb.Container.ChannelID), responseURL: cb.ResponseURL}
	b.log.Info().Str("user", cb.User.ID).Str("action", act.ActionID).Str("value", redact.Tokens(act.Value)).Str("via", req.via).Msg("click")
	if !b.start(func(ctx context.Context) { b.runAction(ctx, to, cb, act) }) {
		b.spawnEphemeral(to, "dlqbot is busy with other requests right now; nothing was done. Click again in a minute.")
	}
}

// start runs fn in the background with a deadline, within MaxInFlight.
func (b *Bot) start(fn func(ctx context.Context)) bool {
	select {
	case b.slots <- struct{}{}:
	default:
		return false
	}
	ok := b.spawn(func() {
		defer func() { <-b.slots }()
		ctx, cancel := context.WithTimeout(b.ctx, b.cfg.WorkTimeout)
		defer cancel()
		fn(ctx)
	})
	if !ok {
		<-b.slots
	}
	return ok
}

// spawnEphemeral sends a refusal without taking a slot.
func (b *Bot) spawnEphemeral(to replyTo, msg string) {
	b.spawn(func() { b.refuse(b.ctx, to, msg) })
}

// runCommand does a command's slow work.
func (b *Bot) runCommand(ctx context.Context, to replyTo, cmd commands.Command) {
	switch c := cmd.(type) {
	case commands.PreviewCmd:
		b.preview(ctx, to, c)
	case commands.ReplayCmd:
		b.approve(ctx, approval{to: to, token: c.Token, params: c.Params, fromCommand: true})
	case commands.ListCmd:
		b.listDLQs(ctx, to)
	case commands.StatusCmd:
		if c.ReplayID == "" {
			b.list(ctx, to)
			return
		}
		b.status(ctx, to, c.ReplayID)
	case commands.PauseCmd:
		b.control(ctx, to, engine.ControlPause, c.ReplayID, false)
	case commands.ResumeCmd:
		b.control(ctx, to, c.Action(), c.ReplayID, false)
	case commands.CancelCmd:
		b.control(ctx, to, engine.ControlCancel, c.ReplayID, false)
	case commands.CheckCmd:
		b.check(ctx, to, c.ReplayID)
	default:
		b.refuse(ctx, to, "`"+cmd.Name()+"` is not available in Slack yet.")
	}
}

// runAction does a click's slow work.
func (b *Bot) runAction(ctx context.Context, to replyTo, cb slack.InteractionCallback, act slack.BlockAction) {
	value := strings.TrimSpace(act.Value)
	switch act.ActionID {
	case blocks.ActionApprove:
		token, digest := blocks.ParseApproveValue(value)
		b.approve(ctx, approval{to: to, token: token, confirmDigest: digest, click: &cb})
	case blocks.ActionDiscard:
		b.discard(ctx, to, value, cb)
	case blocks.ActionPause:
		b.control(ctx, to, engine.ControlPause, value, true)
	case blocks.ActionResume:
		b.control(ctx, to, engine.ControlResume, value, true)
	case blocks.ActionResend:
		b.control(ctx, to, engine.ControlResumeResend, value, true)
	case blocks.ActionCancel:
		b.control(ctx, to, engine.ControlCancel, value, true)
	case blocks.ActionPark:
		b.park(ctx, to, value)
	case blocks.ActionSamples:
		b.showSamples(ctx, to, value)
	case blocks.ActionDetails:
		b.showDetails(ctx, to, value)
	case blocks.ActionPreviewGroup, blocks.ActionPreviewReturned, blocks.ActionWatchPreview:
		b.previewClick(ctx, to, value)
	case blocks.ActionSnooze:
		b.snooze(ctx, to, value)
	default:
		b.log.Info().Str("action", act.ActionID).Msg("unknown action ignored")
	}
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
