package bot

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stroma/dlqbot/ops"
)

// listDLQs answers /dlq list: the DLQs the user may read, deepest first,
// each with its depth and last replay, privately.
func (b *Bot) listDLQs(ctx context.Context, to replyTo) {
	d, err := b.d.Ops.ListDLQs(ctx, ops.SlackCaller(to.user))
	if err != nil {
		b.refuse(ctx, to, userMessage(err, ""))
		return
	}
	b.say(ctx, to, DLQListText(d, b.cfg.CommandName, b.now()))
}

// maxListedDLQs is how many DLQs a Slack reply lists.
const maxListedDLQs = 30

// DLQListText is /dlq list's reply: one line per DLQ (name, depth,
// arrivals in the last hour, top failure group, consumers, last replay),
// what was hidden, and what the list leaves out.
func DLQListText(d ops.DLQs, command string, now time.Time) string {
	if len(d.DLQs) == 0 {
		text := "No dead-letter queue you may read was found."
		if d.Hidden > 0 {
			text += fmt.Sprintf(" _%d you have no `read` permission for are not shown._", d.Hidden)
		}
		return text
	}
	lines := []string{"*Dead-letter queues you may read*, deepest first:"}
	for i, q := range d.DLQs {
		if i == maxListedDLQs {
			lines = append(lines, fmt.Sprintf("…and %d more.", len(d.DLQs)-maxListedDLQs))
			break
		}
		s := fmt.Sprintf("• `%s` · *%d* message(s) · %s", slackEscape(q.Name), q.Messages, arrivedText(q))
		if g := q.TopGroup; g != nil {
			s += fmt.Sprintf(" · top group `%s` `%s` (%d at the preview %s)", g.GroupID, slackEscape(strings.ReplaceAll(g.Type, "`", "'")), g.Messages, agoText(now.Sub(g.SeenAt)))
		}
		if q.Consumers > 0 {
			s += fmt.Sprintf(" · %d consumer(s)", q.Consumers)
		}
		if r := q.LastReplay; r != nil {
			s += fmt.Sprintf(" · last replay `%s` *%s*, %d of %d sent, %d came back, %s", r.ID, r.State, r.Sent, r.Total, r.Returned, agoText(now.Sub(r.CreatedAt)))
		} else {
			s += " · never replayed"
		}
		lines = append(lines, s)
	}
	if d.Hidden > 0 {
		lines = append(lines, fmt.Sprintf("_%d more you have no `read` permission for are not shown._", d.Hidden))
	}
	lines = append(lines, "_"+d.Note+"_ Preview one: `"+command+" preview <dlq>`; `"+command+" status` lists the replays.")
	return strings.Join(lines, "\n")
}

// arrivedText is a DLQ's arrivals in the last hour.
func arrivedText(q ops.DLQ) string {
	switch {
	case q.ArrivalsLastHour == nil:
		return "arrivals in the last hour unknown"
	case !q.ArrivalsSince.IsZero():
		return fmt.Sprintf("%d arrived since %s UTC", *q.ArrivalsLastHour, q.ArrivalsSince.UTC().Format("15:04"))
	}
	return fmt.Sprintf("%d arrived in the last hour", *q.ArrivalsLastHour)
}

// slackEscape escapes &, < and > for Slack's mrkdwn.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// agoText says how long ago d was, coarsely.
func agoText(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}
