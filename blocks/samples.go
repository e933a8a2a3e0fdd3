package blocks

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
)

// Samples renders the sample messages of a preview for a reader of its
// DLQ, as an ephemeral reply: where each goes, why it died, its exception,
// its replay history and the start of its payload (redacted, and as long
// as the engine's excerpt size allows; none when it is zero). The preview's
// channel post never carries them. It returns the blocks and a plain-text
// fallback.
func Samples(p *engine.Preview) ([]slack.Block, string) {
	if p == nil {
		return Error("There is no preview to show samples of.")
	}
	ms := samples(p)
	if !HasSamples(p) {
		text := "The preview of " + code(p.DLQ.Name, 300) + " has no sample messages to show."
		return []slack.Block{section(text)}, fallback(text)
	}
	head := fmt.Sprintf(":lock: *Sample messages of %s* — %s of %s distinct; only you can see this.",
		code(p.DLQ.Name, 300), num(len(ms)), num(distinctRows(p)))
	out := []slack.Block{section(head)}
	for _, m := range ms {
		out = append(out, section(sampleText(m)))
	}
	if g := groupListText(p); g != "" {
		out = append(out, section(g))
	}
	if TargetsCut(p.Targets) {
		out = append(out, targetListBlocks(p.Targets)...)
	}
	return out, fallback(fmt.Sprintf("Sample messages of %s (only you can see this).", escape(p.DLQ.Name)))
}

// HasSamples reports whether p has anything to show a reader privately:
// sample messages, failure groups whose text the channel post leaves out,
// or targets it cuts.
func HasSamples(p *engine.Preview) bool {
	return p != nil && (len(samples(p)) > 0 || groupListText(p) != "" || TargetsCut(p.Targets))
}

// groupListText names the preview's failure groups by their texts for a
// reader (the channel post shows only their types and ids), or "" when
// there are fewer than two.
func groupListText(p *engine.Preview) string {
	if p.Arrivals == nil || len(p.Arrivals.Groups) < 2 {
		return ""
	}
	gs := p.Arrivals.Groups
	lines := make([]string, 0, len(gs))
	for _, g := range gs {
		lines = append(lines, fmt.Sprintf("• *%s* × %s · id %s", num(g.Messages), code(failureName(PrivateView, g.Key, g.Type), 300), code(g.GroupID, 20)))
	}
	return list("*Failure groups* (their texts, for you alone)", lines, len(gs), MaxSectionText, func(n int) string {
		return "…and " + plural(n, "more group", "more groups")
	})
}

// samples picks the first few messages of p that have anything a reader
// would want to see: a payload excerpt or an exception.
func samples(p *engine.Preview) []engine.PreviewMessage {
	var out []engine.PreviewMessage
	for _, m := range p.Messages {
		if m.Excerpt != "" || len(m.Headers) > 0 || m.Exception != "" || m.ExceptionType != "" || m.BadTarget != "" {
			out = append(out, m)
			if len(out) == maxSamples {
				break
			}
		}
	}
	return out
}

// sampleText describes one sample message in at most ~2,000 characters.
func sampleText(m engine.PreviewMessage) string {
	var b strings.Builder
	b.WriteString(code(m.ID, 40))
	if m.Count > 1 {
		fmt.Fprintf(&b, " ×%s", num(m.Count))
	}
	if m.Target != "" {
		b.WriteString(" → " + code(m.Target, 120))
	} else {
		b.WriteString(" → :x: no target")
	}
	fmt.Fprintf(&b, " · %s", esc(oneLine(string(m.Reason)), 30))
	if m.Attempts > 0 {
		fmt.Fprintf(&b, " · %s", plural(m.Attempts, "attempt", "attempts"))
	}
	fmt.Fprintf(&b, " · %s", plural(m.Size, "byte", "bytes"))
	if m.Dialect != "" && m.Dialect != engine.DialectUnknown {
		fmt.Fprintf(&b, " · %s", esc(oneLine(string(m.Dialect)), 20))
	}
	if !m.LastDeath.IsZero() {
		b.WriteString(" · dead-lettered " + date(m.LastDeath))
	}
	if m.Parked {
		b.WriteString(" · :parking: parked, left out")
	}
	if m.BadTarget != "" {
		b.WriteString("\n:x: The headers name " + code(strconv.QuoteToASCII(m.BadTarget), 300) + ", not a valid queue name: no valid target.")
	}
	if m.SourceNote != "" {
		b.WriteString("\n:information_source: " + esc(oneLine(m.SourceNote), 300))
	}
	if ex := exceptionText(m.ExceptionType, m.Exception); ex != "" {
		b.WriteString("\n*Exception:* " + code(ex, 400))
	}
	if h := historyText(m); h != "" {
		b.WriteString("\n" + h)
	}
	if len(m.Problems) > 0 {
		b.WriteString("\n:grey_question: Could not read: " + esc(oneLine(strings.Join(m.Problems, "; ")), 300))
	}
	if h := engine.HeaderLine(m.Headers); h != "" {
		b.WriteString("\n*Headers:* " + code(h, 600))
	}
	if m.Excerpt != "" {
		b.WriteString("\n" + codeBlock(m.Excerpt, excerptChars))
	}
	return b.String()
}

// exceptionText joins an exception's type and message.
func exceptionText(typ, msg string) string {
	switch {
	case typ != "" && msg != "":
		return typ + ": " + msg
	case typ != "":
		return typ
	}
	return msg
}

// historyText says when and by which replay a message was sent before.
func historyText(m engine.PreviewMessage) string {
	if len(m.Replayed) == 0 {
		if m.ReplayCount > 0 {
			return fmt.Sprintf(":repeat: Replayed %s before (x-replay-count), last by %s", plural(m.ReplayCount, "time", "times"), code(m.ReplayID, 60))
		}
		return ""
	}
	last := m.Replayed[0] // newest first
	s := fmt.Sprintf(":repeat: Replayed before by %s, %s", code(last.ReplayID, 60), date(last.At))
	if last.Approver != "" {
		s += " (approved by " + who(last.Approver) + ")"
	}
	if n := len(m.Replayed) - 1; n > 0 {
		s += " and by " + plural(n, "earlier replay", "earlier replays")
	}
	return s
}
