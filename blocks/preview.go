package blocks

import (
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
)

// Caps on what a preview lists; the rest is summarised as "and N more".
const (
	maxTargets       = 10 // target queues listed
	maxSamples       = 3  // sample messages shown to a reader (Samples)
	maxProblemQueues = 5  // queue names named in one aggregated problem line
	excerptChars     = 900
)

// Preview renders a preview: what would go wrong first,
// then the per-target summary, a few sample messages, the token's expiry
// (relative to now) and the Approve and Discard buttons. A preview without
// a token (nothing selected) says that nothing would be replayed and has no
// buttons. It returns the blocks and a plain-text fallback.
func Preview(p *engine.Preview, now time.Time) ([]slack.Block, string) {
	if p == nil {
		return Error("There is no preview to show.")
	}
	out := previewBody(p)
	if p.Token == "" {
		return out, previewText(p)
	}
	buttons := []*slack.ButtonBlockElement{
		button(ActionApprove, ApproveValue(p.Token, ""), "Approve replay", slack.StylePrimary, approveConfirm(p)),
		button(ActionDiscard, p.Token, "Discard", "", nil),
	}
	if HasSamples(p) {
		buttons = append(buttons, button(ActionSamples, p.Token, "Show samples", "", nil))
	}
	buttons = append(buttons, button(ActionDetails, p.Token, "Details", "", nil))
	out = append(out, contextBlock(BlockPreviewExpiry, expiryLine(p, now)), actions(BlockPreviewActions, buttons...))
	return out, previewText(p)
}

// Approved edits an already rendered preview message (for example the
// blocks of an interaction payload's message) to show who approved it:
// the buttons and the expiry line are removed and an outcome line added.
func Approved(original []slack.Block, approver, replayID string) []slack.Block {
	return resolve(original, approvedLine(approver, replayID))
}

// Discarded edits an already rendered preview message to show who
// discarded it, removing its buttons.
func Discarded(original []slack.Block, by string) []slack.Block {
	return resolve(original, discardedLine(by))
}

func approvedLine(approver, replayID string) string {
	return fmt.Sprintf(":white_check_mark: Approved by %s — replay %s; its progress is in the thread.", who(approver), code(replayID, 80))
}

func discardedLine(by string) string {
	return fmt.Sprintf(":wastebasket: Discarded by %s — nothing was replayed, the DLQ is unchanged.", who(by))
}

// previewBody renders everything of a preview except expiry and buttons,
// in as few lines as say what a replay would do: the verdict (one
// headline), the problems one line each, the selection on one line, when
// the messages failed with their failure groups one line each, and the
// targets a problem line does not already name. The mechanics (read depth,
// budget, tap), the per-group and per-target figures are behind the
// Details button (PreviewDetails). It never shows a payload or an
// exception's text: the preview is posted in a channel, and those go only
// to readers of the DLQ (see Samples).
func previewBody(p *engine.Preview) []slack.Block {
	out := []slack.Block{section(headline(p))}
	if s := problemsText(p); s != "" {
		out = append(out, section(s))
	}
	out = append(out, contextBlock("", summaryLine(p)))
	if p.Returns.Mode == engine.ReturnsReread && p.Returns.Detail != "" {
		out = append(out, contextBlock(BlockPreviewReturns, returnsLine(p.Returns)))
	}
	out = append(out, arrivalBlocks(p)...)
	if s := targetsCard(p); s != "" {
		out = append(out, section(s))
	}
	return out
}

// headline is the preview's verdict on one line: safe to replay, or how
// many problems, with what would be replayed where.
func headline(p *engine.Preview) string {
	what := fmt.Sprintf("%s from %s to %s", msgs(p.Selected), code(p.DLQ.Name, 300), plural(len(p.Targets), "target queue", "target queues"))
	switch n := p.Warnings(); {
	case p.Token == "":
		return fmt.Sprintf(":information_source: *Nothing to replay* from %s — %s. The DLQ is unchanged.", code(p.DLQ.Name, 300), NothingWhy(p))
	case n == 0:
		return ":white_check_mark: *Safe to replay*: " + what
	default:
		return fmt.Sprintf(":warning: *%s*: %s", plural(n, "problem", "problems"), what)
	}
}

// summaryLine is the selection on one line: what was asked for, how many
// distinct messages, those parked and left out (unless a problem line says
// so) and who asked.
func summaryLine(p *engine.Preview) string {
	var parts []string
	if p.Selection != "" {
		parts = append(parts, "Selection "+code(p.Selection, 1000))
	}
	if p.Selected > 0 {
		parts = append(parts, num(p.Distinct)+" distinct")
	}
	if p.Parked > 0 && !hasProblem(p, engine.ProblemParked) {
		parts = append(parts, msgs(p.Parked)+" parked, left out")
	}
	return strings.Join(append(parts, "requested by "+who(p.Requester)), " · ")
}

// hasProblem reports whether p lists a problem of kind k.
func hasProblem(p *engine.Preview, k engine.ProblemKind) bool {
	for _, pr := range p.Problems {
		if pr.Kind == k {
			return true
		}
	}
	return false
}

// NothingWhy says why a preview has no token, in plain text (no markup):
// the Slack card's headline and the terminal's give it.
func NothingWhy(p *engine.Preview) string {
	why := "no token was issued; preview again"
	switch {
	case p.Scanned == 0:
		why = "the DLQ is empty"
	case distinctRows(p) == 0:
		why = fmt.Sprintf("none of the %s scanned matches the selection", msgs(p.Scanned))
	case p.Selected == 0:
		why = fmt.Sprintf("of the %s that match, none can be replayed (see below)", msgs(matching(p)))
	}
	return why
}

// matching counts the copies that match the selection (p.Matched; a
// preview built by hand may list them in p.Messages only).
func matching(p *engine.Preview) int {
	n := 0
	for _, m := range p.Messages {
		n += m.Count
	}
	return max(n, p.Matched)
}

// distinctRows counts the distinct messages that match the selection;
// p.Messages lists only the first of them.
func distinctRows(p *engine.Preview) int {
	return max(len(p.Messages), p.Rows)
}

// problemsText lists what would go wrong, most serious first, one line per
// kind of problem (problems of one kind on several queues are combined);
// the headline has already counted them.
func problemsText(p *engine.Preview) string {
	var lines []string
	if engine.StillArriving(p.Arrivals) {
		lines = append(lines, fmt.Sprintf(":red_circle: *Still arriving* — %s in the last %s: the cause may not be fixed yet.", num(p.Arrivals.Recent), Width(p.Arrivals.RecentWindow)))
	}
	if len(p.Problems) == 0 && len(lines) == 0 {
		return ""
	}
	var kinds []engine.ProblemKind
	byKind := map[engine.ProblemKind][]engine.Problem{}
	for _, pr := range p.Problems {
		if _, ok := byKind[pr.Kind]; !ok {
			kinds = append(kinds, pr.Kind)
		}
		byKind[pr.Kind] = append(byKind[pr.Kind], pr)
	}
	for _, k := range kinds {
		if k == engine.ProblemConsumersUnchanged {
			lines = append(lines, unchangedLine(byKind[k], p.Targets))
			continue
		}
		lines = append(lines, problemLine(p, byKind[k]))
	}
	return list("", lines, len(lines), MaxSectionText, func(n int) string {
		return "…and " + plural(n, "more kind of problem", "more kinds of problem")
	})
}

// problemLine words the problems of one kind among p's.
func problemLine(p *engine.Preview, prs []engine.Problem) string {
	pr, total := prs[0], 0
	for _, x := range prs {
		total += x.Messages
	}
	queues := problemQueues(prs)
	switch pr.Kind {
	case engine.ProblemTargetMissing:
		return fmt.Sprintf(":x: *Target queue missing* — %s %s not exist: %s would stay in the DLQ.", queues, doesDo(len(prs)), msgs(total))
	case engine.ProblemNoTarget:
		bad := 0
		for _, x := range prs {
			bad += x.InvalidTargets
		}
		if bad > 0 {
			return fmt.Sprintf(":x: *No valid target* — %s %s no valid target: %s %s a queue in %s headers that is not a valid queue name (white space, a control or an invisible character), and %s never replayed to it. They are left out; *Show samples* shows the names. Replay them with %s.",
				msgs(total), hasHave(total), num(bad), pick(bad, "names", "name"), pick(bad, "its", "their"), pick(bad, "is", "are"), code("to=<queue>", 20))
		}
		return fmt.Sprintf(":x: *No target queue* — %s %s no source queue that can be derived; they are left out. Replay them with %s.", msgs(total), hasHave(total), code("to=<queue>", 20))
	case engine.ProblemNoConsumers:
		return fmt.Sprintf(":warning: *No consumers* — %s: %s would wait there, and the replay would stop after its first step.", queues, msgs(total))
	case engine.ProblemAlreadyReplayed:
		return fmt.Sprintf(":repeat: *Already replayed* — %s %s replayed before and came back.", msgs(total), wasWere(total))
	case engine.ProblemParked:
		return fmt.Sprintf(":parking: *Parked* — %s replayed park_after times or more, left out (%s includes them).", msgs(total), code("include_parked=true", 30))
	case engine.ProblemDeliveryLimit:
		return deliveryLimitLine(p.Budget)
	case engine.ProblemRetryState:
		return fmt.Sprintf(":no_entry_sign: *Consumer would refuse replayed copies* — %s %s a framework marker (rascal's immediateNack) that makes the consumer nack a redelivered copy before its handler runs; the replay resets it, so the handler sees each copy.", msgs(total), hasHave(total))
	case engine.ProblemPartialRead:
		return ":eyes: *Partial read* — " + esc(oneLine(pr.Detail), 600)
	case engine.ProblemUnreadable:
		return fmt.Sprintf(":grey_question: *Unreadable headers* — %s: shown with what could be read.", msgs(total))
	}
	line := ":warning: *" + esc(oneLine(string(pr.Kind)), 60) + "* — " + esc(oneLine(pr.Detail), 500)
	if len(prs) > 1 {
		line += fmt.Sprintf(" (and %s more like it)", num(len(prs)-1))
	}
	return line
}

// deliveryLimitLine words a quorum DLQ's read budget on the card: that
// reads use it up, and whether a replay would run out of it (b nil: not
// known); the reads, the limit and how to raise it are behind Details.
func deliveryLimitLine(b *engine.BudgetView) string {
	s := ":hourglass_flowing_sand: *Quorum DLQ delivery limit* — every read uses up a delivery attempt"
	if b != nil && b.ReadsLeft < b.ReadsNeeded {
		s += fmt.Sprintf(": a replay needs %s and the limit leaves %s, so it would stop by itself near the limit", plural(b.ReadsNeeded, "read", "reads"), num(b.ReadsLeft))
	}
	return s + "; *Details* has the read budget."
}

// problemQueues names the queues of problems of one kind: "`a`, `b` and 3
// more queues".
func problemQueues(prs []engine.Problem) string {
	var names []string
	for _, pr := range prs[:min(len(prs), maxProblemQueues)] {
		names = append(names, code(pr.Queue, 60))
	}
	s := strings.Join(names, ", ")
	if rest := len(prs) - len(names); rest > 0 {
		s += " and " + plural(rest, "more queue", "more queues")
	}
	return s
}

// expiryLine says when the token expires and how to quote it.
func expiryLine(p *engine.Preview, now time.Time) string {
	when := "at " + esc(p.ExpiresAt, 40)
	if t, err := time.Parse(time.RFC3339, p.ExpiresAt); err == nil {
		if d := t.Sub(now); d > 0 {
			when = date(t) + " (in " + span(d) + ")"
		} else {
			when = date(t) + " — *it has expired*; preview again"
		}
	}
	return fmt.Sprintf("Token %s expires %s", code(p.Token, 200), when)
}

func approveConfirm(p *engine.Preview) *slack.ConfirmationBlockObject {
	text := fmt.Sprintf("Replay %s from %s to %s (listed above%s) in canary steps? It stops by itself if any come back.",
		msgs(p.Selected), clip(oneLine(p.DLQ.Name), 120), plural(len(p.Targets), "target queue", "target queues"), cutNote(p.Targets))
	if n := p.Warnings(); n > 0 {
		text += fmt.Sprintf(" The preview lists %s.", plural(n, "problem", "problems"))
	}
	return confirm("Start the replay?", text, "Replay", "Not yet", slack.StylePrimary)
}

// previewText is the preview's notification fallback.
func previewText(p *engine.Preview) string {
	s := "Preview of " + escape(p.DLQ.Name) + ": "
	if p.Token == "" {
		s += "nothing would be replayed"
	} else {
		s += fmt.Sprintf("%s would be replayed to %s", msgs(p.Selected), plural(len(p.Targets), "queue", "queues"))
	}
	s += arrivalsFallback(p.Arrivals)
	if n := len(p.Problems); n > 0 {
		s += fmt.Sprintf("; %s, first: %s", plural(n, "problem", "problems"), problemFallback(p.Problems[0]))
	}
	return fallback(s + ".")
}

// returnsLine says how a replay would find the copies that come back:
// through a tap, or (a warning) by re-reading the DLQ.
func returnsLine(v engine.ReturnsView) string {
	if v.Mode == engine.ReturnsReread {
		return ":warning: " + esc(v.Detail, 1500)
	}
	return ":mag: " + esc(v.Detail, 1500)
}

// problemFallback names a problem for the notification text: its kind and
// queue, never its detail (the text a channel's notification shows is
// held to the channel view's allowlist too).
func problemFallback(pr engine.Problem) string {
	s := strings.ReplaceAll(escape(oneLine(string(pr.Kind))), "_", " ")
	if pr.Queue != "" {
		s += " (" + escape(oneLine(pr.Queue)) + ")"
	}
	return s
}

// cutNote points at the full list of targets when the post cuts it.
func cutNote(targets []engine.TargetView) string {
	if TargetsCut(targets) {
		return "; Show samples lists every one"
	}
	return ""
}
