package bot

import (
	"context"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/ops"
)

var _ ops.AlertPoster = (*Notifier)(nil)

// Snoozer silences a DLQ's alerts for a clicker (ops.Watcher.Snooze).
type Snoozer interface {
	Snooze(ctx context.Context, c ops.Caller, dlq string) (time.Time, error)
}

// PostAlert posts a DLQ watch alert in its channel (ops.AlertPoster).
func (n *Notifier) PostAlert(ctx context.Context, a ops.Alert) (string, error) {
	bl, text := blocks.Alert(a)
	return n.post(ctx, requestAttempts, a.Channel, "", bl, text)
}

// EditAlert replaces the alert message at ts with a's state. The watch
// edits an alert at most once a second (ops.AlertStore.Grow), as the
// progress messages are.
func (n *Notifier) EditAlert(ctx context.Context, ts string, a ops.Alert) error {
	bl, text := blocks.Alert(a)
	return n.update(ctx, requestAttempts, a.Channel, ts, bl, text)
}

// SetSnoozer sets what the Snooze 1h button calls, for wiring where the
// watch is built after the bot; call it before serving. Without one the
// button is refused.
func (b *Bot) SetSnoozer(s Snoozer) { b.snoozer = s }

// snooze silences the DLQ an alert's Snooze button names, for the
// clicker (who needs read on it); the alert message says so, edited by
// the watch.
func (b *Bot) snooze(ctx context.Context, to replyTo, dlq string) {
	if b.snoozer == nil {
		b.refuse(ctx, to, "Alerts are not watched by this dlqbot; nothing was snoozed.")
		return
	}
	until, err := b.snoozer.Snooze(ctx, ops.SlackCaller(to.user).InChannel(to.channel), dlq)
	if err != nil {
		b.refuse(ctx, to, userMessage(err, dlq))
		return
	}
	b.say(ctx, to, fmt.Sprintf(":zzz: Alerts of `%s` are snoozed until %s UTC.", blocks.EscapeKeepCode(dlq), until.UTC().Format("15:04")))
}
