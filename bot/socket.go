package bot

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

// RunSocketMode connects to Slack in Socket Mode (Config.AppToken) and
// serves requests until ctx ends: each envelope is acked at once — a slash
// command's ack carrying its immediate reply, as over HTTP — and handed to
// the same dispatch as the HTTP endpoints, once: a request Slack delivers
// again is acked and dropped (socket_dedup.go). slack-go reconnects by
// itself.
func (b *Bot) RunSocketMode(ctx context.Context) error {
	if b.cfg.AppToken == "" {
		return errors.New("bot: socket mode: no app-level token (SLACK_APP_TOKEN)")
	}
	logw := b.log.With().Str("transport", "socket").Logger()
	client := socketmode.New(b.api, socketmode.OptionLog(stdlog.New(logw, "", 0)))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- client.RunContext(ctx) }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("bot: socket mode: %w", err)
		case evt := <-client.Events:
			b.socketEvent(ctx, client, evt)
		}
	}
}

// socketEvent acks and dispatches one Socket Mode event.
func (b *Bot) socketEvent(ctx context.Context, client *socketmode.Client, evt socketmode.Event) {
	log := b.log.With().Str("transport", "socket").Logger()
	switch evt.Type {
	case socketmode.EventTypeConnecting:
		log.Info().Msg("connecting to Slack")
	case socketmode.EventTypeConnected:
		log.Info().Msg("connected to Slack")
	case socketmode.EventTypeConnectionError, socketmode.EventTypeInvalidAuth, socketmode.EventTypeIncomingError:
		log.Warn().Str("event", string(evt.Type)).Interface("detail", evt.Data).Msg("socket mode trouble")
	case socketmode.EventTypeSlashCommand:
		if evt.Request == nil {
			return
		}
		cmd, ok := evt.Data.(slack.SlashCommand)
		if !ok || validCommand(cmd) != nil {
			log.Warn().Msg("socket mode: malformed slash command acked and ignored")
			b.ack(ctx, client, evt.Request, nil)
			return
		}
		switch first, err := b.socketFirst(ctx, evt.Request, cmd.TriggerID, log); {
		case err != nil:
			b.ack(ctx, client, evt.Request, ephemeralAck("dlqbot cannot check this request right now; nothing was done, try again."))
			return
		case !first:
			b.ack(ctx, client, evt.Request, nil)
			return
		}
		reply := b.dispatch(request{kind: kindCommand, cmd: cmd, via: "socket"})
		b.ack(ctx, client, evt.Request, reply)
	case socketmode.EventTypeInteractive:
		if evt.Request == nil {
			return
		}
		b.ack(ctx, client, evt.Request, nil)
		cb, ok := evt.Data.(slack.InteractionCallback)
		if !ok || validAction(cb) != nil {
			log.Warn().Msg("socket mode: malformed interaction acked and ignored")
			return
		}
		if first, err := b.socketFirst(ctx, evt.Request, cb.TriggerID, log); err != nil || !first {
			return
		}
		b.dispatch(request{kind: kindAction, cb: cb, via: "socket"})
	}
}

// ack acknowledges an envelope, with a payload when there is one.
func (b *Bot) ack(ctx context.Context, client *socketmode.Client, req *socketmode.Request, reply *ackReply) {
	var payload any
	if reply != nil {
		payload = reply
	}
	if err := client.AckCtx(ctx, req.EnvelopeID, payload); err != nil {
		b.log.Warn().Err(err).Str("envelope", req.EnvelopeID).Msg("socket mode ack failed")
	}
}
