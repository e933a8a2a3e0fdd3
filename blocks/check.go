package blocks

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
)

// Caps on what a check report lists.
const (
	maxGroups   = 10 // failure groups
	maxParkIDs  = 10 // ids named at the park limit
	maxErrorMsg = 2900
)

// Check renders the answer to "did the replay work?" for view: how many
// of the replayed messages came back, grouped by failure with an example
// each; new failures, counted apart; and those at the park limit, with a
// Park button (dlq.park, value the replay id) when there are any. Copies not
// back are "not seen in a dead-letter queue" — never called processed.
// The channel view (a follow-up in the replay's thread) names each failure
// group by its type and id; the private view (the check command's
// ephemeral answer) by its text, with an example's exception.
func Check(c engine.CheckReport, v View) ([]slack.Block, string) {
	head := fmt.Sprintf(":mag: *Did replay %s work?* · %s", code(c.ReplayID, 60), code(c.DLQ, 300))
	if c.Label != "" {
		head += " · follow-up " + esc(oneLine(c.Label), 20)
	}
	notBack := max(c.Replayed-c.Returned, 0)
	var summary string
	switch {
	case c.Replayed == 0:
		summary = "The replay sent nothing, so nothing can come back."
	case c.Unseen != nil:
		summary = fmt.Sprintf(":grey_question: *Could not tell for %s.* The DLQ's tap was gone from %s to %s and the DLQ could not be re-read in its place, so copies that came back then were not seen. %s of %s seen back so far.",
			plural(c.Unseen.Count, "copy sent", "copies sent"), dateSecs(c.Unseen.From), untilText(c.Unseen.To), num(c.Returned), num(c.Replayed))
	case c.HeldByReplay != nil:
		// What a replay's read holds was not read: copies among it may
		// have come back, so neither "0 came back" nor a tick.
		summary = fmt.Sprintf(":grey_question: *%s of %s sent seen back so far.* Not read: %s (dlqbot's own read of the DLQ); copies that came back among them are not counted. Check again once it ends.",
			num(c.Returned), num(c.Replayed), esc(c.HeldByReplay.Words(), 300))
	case c.Returned == 0:
		summary = fmt.Sprintf(":white_check_mark: *0 of %s sent came back.* %s not seen in a dead-letter queue so far.",
			num(c.Replayed), num(notBack))
	default:
		summary = fmt.Sprintf(":warning: *%s of %s sent came back*, dead-lettered with this replay's id. %s not seen in a dead-letter queue so far.",
			num(c.Returned), num(c.Replayed), num(notBack))
	}
	out := []slack.Block{section(head + "\n" + summary)}
	if len(c.Groups) > 0 {
		out = append(out, checkGroupBlocks(c, v)...)
	}
	if c.NewFailures > 0 {
		out = append(out, section(fmt.Sprintf(":information_source: *%s since the replay began*: dead-lettered in %s without this replay's id, up to this check — counted apart, not as messages that came back.",
			plural(c.NewFailures, "new failure", "new failures"), code(c.DLQ, 300))))
	}
	var buttons []*slack.ButtonBlockElement
	if c.Returned > 0 && c.ReplayID != "" && c.DLQ != "" {
		buttons = append(buttons, button(ActionPreviewReturned, ReturnedSelection(c.DLQ, c.ReplayID, ""), "Preview the "+plural(c.Returned, "copy", "copies")+" back", "", nil))
	}
	if c.AtParkLimit > 0 {
		out = append(out, section(parkText(c)))
		if c.ReplayID != "" {
			buttons = append(buttons, button(ActionPark, c.ReplayID, "Park "+msgs(c.AtParkLimit), slack.StyleDanger,
				confirm("Park these messages?",
					fmt.Sprintf("Move %s that came back after %s to the parking queue? They leave the DLQ and are not replayed.", msgs(c.AtParkLimit), parkAfter(c)),
					"Park", "Not yet", slack.StyleDanger)))
		}
	}
	if len(buttons) > 0 {
		out = append(out, actions(BlockCheckActions, buttons...))
	}
	when := "on demand"
	if !c.At.IsZero() {
		when = date(c.At)
	}
	out = append(out, contextBlock("", "Checked "+when+" · a copy counts as back when it carries this replay's id and a new death; a copy not seen in a dead-letter queue may still be waiting, or have been dropped"))
	text := fmt.Sprintf("Replay %s: %s of %s sent came back, %s not seen in a dead-letter queue.",
		escape(c.ReplayID), num(c.Returned), num(c.Replayed), num(notBack))
	switch {
	case c.Unseen != nil:
		text = fmt.Sprintf("Replay %s: %s of %s sent seen back; %s.", escape(c.ReplayID), num(c.Returned), num(c.Replayed), escape(c.Unseen.Words()))
	case c.HeldByReplay != nil:
		text = fmt.Sprintf("Replay %s: %s of %s sent seen back; not read: %s.", escape(c.ReplayID), num(c.Returned), num(c.Replayed), escape(c.HeldByReplay.Words()))
	}
	return out, fallback(text)
}

// checkGroupBlocks lists the failure groups of the copies that came back:
// the largest few one section each, with a button that previews the
// group's returned copies (when the report names its replay and DLQ), then
// the rest as one list.
func checkGroupBlocks(c engine.CheckReport, v View) []slack.Block {
	if c.ReplayID == "" || c.DLQ == "" {
		return []slack.Block{section(groupsText(c.Groups, "*Came back, by failure*", v))}
	}
	shown := c.Groups[:min(len(c.Groups), maxArrivalRows)]
	out := []slack.Block{section("*Came back, by failure*")}
	for _, g := range shown {
		s := section(groupLine(g, v))
		value := ReturnedSelection(c.DLQ, c.ReplayID, engine.GroupID(g.Group))
		if utf8.RuneCountInString(value) <= MaxButtonValue {
			s.Accessory = slack.NewAccessory(button(ActionPreviewGroup, value, "Preview this group", "", nil))
		}
		out = append(out, s)
	}
	if rest := c.Groups[len(shown):]; len(rest) > 0 {
		out = append(out, section(groupsText(rest, "*Other failures that came back*", v)))
	}
	return out
}

// groupsText lists failure groups of the copies that came back.
func groupsText(groups []engine.CheckGroup, head string, v View) string {
	lines := make([]string, 0, maxGroups)
	for _, g := range groups[:min(len(groups), maxGroups)] {
		lines = append(lines, "• "+groupLine(g, v))
	}
	return list(head, lines, len(groups), MaxSectionText, func(hidden int) string {
		n := 0
		for _, g := range groups[len(groups)-hidden:] {
			n += g.Count
		}
		return fmt.Sprintf("…and %s (%s)", plural(hidden, "more group", "more groups"), msgs(n))
	})
}

// groupLine describes one failure group of returned copies: in the
// channel view its type and id, in the private view its text and an
// example's exception.
func groupLine(g engine.CheckGroup, v View) string {
	l := fmt.Sprintf("*%s* × %s", num(g.Count), code(failureName(v, g.Group, g.Type), 300))
	if v == ChannelView {
		l += " · id " + code(engine.GroupID(g.Group), 20)
		if g.Reason != "" {
			l += " (" + esc(oneLine(g.Reason), 30) + ")"
		}
		return l
	}
	if g.ExampleID != "" {
		l += " — e.g. " + code(g.ExampleID, 40)
		if g.Reason != "" {
			l += " (" + esc(oneLine(g.Reason), 30) + ")"
		}
	}
	if g.Example != "" && g.Example != g.Group {
		l += ": " + code(g.Example, 300)
	}
	return l
}

// parkText names the messages at the park limit.
func parkText(c engine.CheckReport) string {
	var ids []string
	for _, id := range c.ParkIDs[:min(len(c.ParkIDs), maxParkIDs)] {
		ids = append(ids, code(id, 40))
	}
	s := fmt.Sprintf(":parking: *%s at the park limit*: %s came back after %s. Replaying %s again is unlikely to help.",
		num(c.AtParkLimit), pick(c.AtParkLimit, "it", "they"), parkAfter(c), pick(c.AtParkLimit, "it", "them"))
	if len(ids) > 0 {
		s += "\n" + strings.Join(ids, ", ")
		if rest := max(c.AtParkLimit, len(c.ParkIDs)) - len(ids); rest > 0 {
			s += " and " + num(rest) + " more"
		}
	}
	return s
}

func parkAfter(c engine.CheckReport) string {
	if c.ParkAfter > 0 {
		return "being replayed " + plural(c.ParkAfter, "time", "times") + " or more"
	}
	return "being replayed park_after times or more"
}

// Error renders a refusal or error (bad syntax, unknown queue, missing
// permission, expired or used token) for an ephemeral reply, escaped, with
// its plain-text fallback. It names the problem and nothing else.
func Error(msg string) ([]slack.Block, string) {
	return []slack.Block{section(Ephemeral(msg))}, fallback(Ephemeral(msg))
}

// Ephemeral returns msg as the mrkdwn text of an ephemeral refusal,
// prefixed with an icon and cut to fit one section. msg may use code
// formatting (backticks are kept); &, < and > are escaped, so quoted user
// input cannot mention anyone.
func Ephemeral(msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		msg = "That did not work."
	}
	return ":no_entry_sign: " + escKeepCode(msg, maxErrorMsg)
}
