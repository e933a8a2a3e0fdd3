package blocks

import (
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// Action ids of a DLQ watch alert's buttons; both carry the DLQ's name.
const (
	// ActionWatchPreview previews the DLQ for the clicker, as
	// `/dlq preview <dlq>`, posting the preview in the channel.
	ActionWatchPreview = "dlq.preview"
	// ActionSnooze silences the DLQ's alerts for an hour.
	ActionSnooze = "dlq.snooze"
)

// Block ids of an open alert: its Preview and Snooze buttons, and the
// line asking for a preview when no failure groups are known.
const (
	BlockAlertActions = "dlq.alert.actions"
	BlockAlertGroups  = "dlq.alert.groups"
)

// Alert renders a DLQ watch alert: open (with its buttons), resolved
// (naming the replays that ran while it was open) or snoozed. It shows
// counts, times, a sparkline of the DLQ's recent depth and, open, the
// top failure groups its latest preview saw (by id and type); never a
// message's content or an exception's text.
func Alert(a ops.Alert) ([]slack.Block, string) {
	dlq := "`" + escape(a.DLQ) + "`"
	var head, text string
	switch a.State {
	case ops.AlertResolved:
		head = fmt.Sprintf(":white_check_mark: *Resolved:* %s is back to %s", dlq, msgs(a.Depth))
		text = fmt.Sprintf("Resolved: %s is back to %d", a.DLQ, a.Depth)
	case ops.AlertSnoozed:
		head = fmt.Sprintf(":zzz: *Snoozed:* alerts of %s are off until %s UTC (by <@%s>)", dlq, a.Until.UTC().Format("15:04"), escape(a.By))
		text = fmt.Sprintf("Snoozed: alerts of %s are off until %s UTC", a.DLQ, a.Until.UTC().Format("15:04"))
	default:
		head = fmt.Sprintf(":rotating_light: *%d new dead letters in %s*", a.Arrived, dlq)
		text = fmt.Sprintf("%d new dead letters in %s", a.Arrived, a.DLQ)
	}
	bl := []slack.Block{section(head)}
	var facts []string
	if a.State == ops.AlertOpen {
		facts = append(facts, fmt.Sprintf("about %s/min", perMin(a.PerMinute)),
			fmt.Sprintf("%s in the DLQ now, %d before", msgs(a.Depth), a.Baseline),
			fmt.Sprintf("threshold %d within %s", a.Threshold, shortDur(a.Within)))
	} else {
		facts = append(facts, fmt.Sprintf("%d new dead letters while it was open", a.Arrived),
			fmt.Sprintf("open %s–%s UTC", a.Opened.UTC().Format("15:04"), a.Ended.UTC().Format("15:04")))
	}
	if len(a.Depths) > 1 {
		facts = append(facts, code(Sparkline(a.Depths), 2*len(a.Depths)+2))
	}
	bl = append(bl, section(strings.Join(facts, " · ")))
	switch a.State {
	case ops.AlertOpen:
		bl = append(bl, alertGroups(a.Seen), slack.NewActionBlock(BlockAlertActions,
			button(ActionWatchPreview, a.DLQ, "Preview", slack.StylePrimary, nil),
			button(ActionSnooze, a.DLQ, "Snooze 1h", "", nil)))
	case ops.AlertResolved:
		drained := "No replay of it ran while the alert was open."
		if len(a.Replays) > 0 {
			ids := make([]string, len(a.Replays))
			for i, id := range a.Replays {
				ids[i] = "`" + escape(id) + "`"
			}
			drained = "Drained by " + strings.Join(ids, ", ") + "."
			text += "; drained by " + strings.Join(a.Replays, ", ")
		}
		bl = append(bl, contextBlock("", drained))
	}
	return bl, fallback(text)
}

// alertGroups names the failure groups the DLQ's latest whole preview
// saw, by id, type and count (an alert is posted in a channel: never a
// group's text), with when; without them it asks for a preview.
func alertGroups(seen *engine.Arrivals) slack.Block {
	if seen == nil || len(seen.Groups) == 0 {
		return contextBlock(BlockAlertGroups, ":mag: Preview to see its failure groups.")
	}
	parts := make([]string, 0, len(seen.Groups)+1)
	for _, g := range seen.Groups {
		parts = append(parts, fmt.Sprintf("%s %s × %s", code(g.GroupID, 20), code(failureName(ChannelView, "", g.Type), 120), num(g.Messages)))
	}
	if seen.MoreGroups > 0 {
		parts = append(parts, "…and "+msgs(seen.MoreGroups)+" in other groups")
	}
	return section(fmt.Sprintf("*Top failure groups* at the last preview (%s): ", date(seen.Now)) + strings.Join(parts, " · "))
}

// perMin formats a rate per minute: whole numbers from 10 up, one
// decimal below.
func perMin(r float64) string {
	if r >= 10 {
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.1f", r)
}

// shortDur writes d without zero units ("5m", "90s", "1h30m").
func shortDur(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
