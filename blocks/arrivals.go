package blocks

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
)

// Action ids of the buttons that post another preview; their value is the
// selection to preview (as the grammar reads it), so any replica can act
// on a click. A click needs read on the DLQ, like any preview.
const (
	// ActionPreviewGroup previews one failure group of a preview, or of
	// the copies a check found back.
	ActionPreviewGroup = "dlq.preview_group"
	// ActionPreviewReturned previews the copies a replay got back.
	ActionPreviewReturned = "dlq.preview_returned"
)

// maxCardGroups is how many failure groups the preview's card lists, one
// line each with a button; maxArrivalRows how many failure groups (or
// source queues) its details draw with their own sparkline.
const (
	maxCardGroups  = 3
	maxArrivalRows = 5
)

// sparkLevels are the sparkline's bars from lowest to highest; a bucket
// without messages is sparkEmpty.
const (
	sparkLevels = "▁▂▃▄▅▆▇█"
	sparkEmpty  = "·"
)

// Sparkline draws counts as one character each, scaled to their peak: an
// empty bucket is "·", a bucket holding anything at least "▁", the peak "█".
func Sparkline(counts []int) string {
	peak := 0
	for _, c := range counts {
		peak = max(peak, c)
	}
	levels := []rune(sparkLevels)
	var b strings.Builder
	for _, c := range counts {
		if c <= 0 {
			b.WriteString(sparkEmpty)
			continue
		}
		l := (c*len(levels) + peak - 1) / peak // 1..len(levels), rounded up
		b.WriteRune(levels[min(max(l, 1), len(levels))-1])
	}
	return b.String()
}

// GroupSelection is the selection of one failure group of a previewed
// selection: the same selection (canonical text) narrowed with group=.
func GroupSelection(selection, groupID string) string {
	return strings.TrimSpace(selection) + " group=" + groupID
}

// ReturnedSelection is the selection of the copies replay got back in
// dlq, narrowed to one failure group when groupID is not "".
func ReturnedSelection(dlq, replayID, groupID string) string {
	s := dlq + " replayed_by=" + replayID
	if groupID != "" {
		s += " group=" + groupID
	}
	return s
}

// arrivalBlocks renders on the preview's card when the selected messages
// were dead-lettered: one line with the overall sparkline and its span,
// then the largest failure groups one line each (count, type and id, still
// arriving or when the last came), each with a button that previews that
// group alone when there are several, and how many messages the rest
// hold. The per-group sparklines, the source queues and the messages
// without a failure time are in the details (arrivalDetailBlocks).
func arrivalBlocks(p *engine.Preview) []slack.Block {
	a := p.Arrivals
	if a == nil || a.Messages == 0 {
		return nil
	}
	var out []slack.Block
	if a.Messages > a.Undated {
		out = append(out, contextBlock("", fmt.Sprintf(":chart_with_upwards_trend: *When they were dead-lettered*: %s %s → %s",
			code(Sparkline(a.Counts), 2*engine.ArrivalBuckets), axisTime(a.Start, a), axisTime(a.Start.Add(time.Duration(len(a.Counts))*a.Bucket), a))))
	}
	rows, more := a.Groups, a.MoreGroups
	several := len(rows)+min(more, 1) >= 2
	shown := rows[:min(len(rows), maxCardGroups)]
	for _, r := range rows[len(shown):] {
		more += r.Messages
	}
	for _, r := range shown {
		// The preview is posted in a channel: a group shows as its type
		// and id, never its exception text.
		s := section(cardGroupLine(a, channelRow(r)))
		value := GroupSelection(p.Selection, r.GroupID)
		if several && r.GroupID != "" && utf8.RuneCountInString(value) <= MaxButtonValue {
			s.Accessory = slack.NewAccessory(button(ActionPreviewGroup, value, "Preview this group", "", nil))
		}
		out = append(out, s)
	}
	if more > 0 {
		out = append(out, contextBlock("", fmt.Sprintf("…and %s in other failure groups; *Details* lists more.", msgs(more))))
	}
	return out
}

// cardGroupLine is a failure group's line on the card: "*45* × `rejected` ·
// group `g…` · last 1h 16m ago".
func cardGroupLine(a *engine.Arrivals, r engine.ArrivalRow) string {
	name := r.Key
	if name == "" {
		name = "failure"
	}
	s := fmt.Sprintf("*%s* × %s", num(r.Messages), code(name, 300))
	if r.GroupID != "" {
		s += " · group " + code(r.GroupID, 20)
	}
	switch {
	case r.StillArriving():
		s += " · :red_circle: still arriving" // the problem line counts them
	case r.Messages > r.Undated:
		s += " · last " + ago(a.Now.Sub(r.Last))
	}
	return s
}

// arrivalDetailBlocks renders when the selected messages failed, for the
// preview's details: one section with the overall sparkline, first and
// last failure and whether failures are still arriving; then, when there
// are several failure groups (else several source queues), one row each
// for the largest, with its own sparkline. A group shows as its type and
// id, as on the card.
func arrivalDetailBlocks(a *engine.Arrivals) []slack.Block {
	if a == nil || a.Messages == 0 {
		return nil
	}
	out := []slack.Block{section(arrivalHead(a))}
	rows, byGroup := a.Groups, true
	more := a.MoreGroups
	if len(rows)+min(more, 1) < 2 {
		rows, byGroup, more = a.Sources, false, a.MoreSources
	}
	if len(rows)+min(more, 1) < 2 {
		return out
	}
	shown := rows[:min(len(rows), maxArrivalRows)]
	for _, r := range rows[len(shown):] {
		more += r.Messages
	}
	for _, r := range shown {
		if byGroup {
			r = channelRow(r)
		}
		out = append(out, section(arrivalRowText(a, r, byGroup)))
	}
	what := "source queues"
	if byGroup {
		what = "failure groups"
	}
	if more > 0 {
		out = append(out, contextBlock("", fmt.Sprintf("…and %s in other %s.", msgs(more), what)))
	}
	if byGroup {
		out = append(out, contextBlock("", "*Preview this group* on the card, or "+code("group=<id>", 20)+" in a preview's selection, previews one failure group alone, to approve just the part a fix covers."))
	}
	return out
}

// arrivalHead is the overall line: span, sparkline, first and last, still
// arriving, and the messages without a failure time.
func arrivalHead(a *engine.Arrivals) string {
	var b strings.Builder
	b.WriteString(":chart_with_upwards_trend: *When they were dead-lettered*")
	dated := a.Messages - a.Undated
	if dated > 0 {
		fmt.Fprintf(&b, " · %s → %s, each bar %s\n", axisTime(a.Start, a), axisTime(a.Start.Add(time.Duration(len(a.Counts))*a.Bucket), a), Width(a.Bucket))
		b.WriteString(code(Sparkline(a.Counts), 2*engine.ArrivalBuckets) + " " + msgs(dated))
		fmt.Fprintf(&b, " · first %s · last %s", date(a.First), date(a.Last))
		b.WriteString(" · " + arrivingText(a.ArrivalRow, a))
	}
	if a.Undated > 0 {
		if dated > 0 {
			b.WriteString("\n")
		} else {
			b.WriteString(" · ")
		}
		fmt.Fprintf(&b, ":grey_question: %s %s no failure time (Spring's recoverer records none): counted here, not drawn.", msgs(a.Undated), hasHave(a.Undated))
	}
	return b.String()
}

// arrivalRowText is one failure group's (or source queue's) line.
func arrivalRowText(a *engine.Arrivals, r engine.ArrivalRow, byGroup bool) string {
	var b strings.Builder
	name := r.Key
	if name == "" {
		name = "(no source queue)"
	}
	if len(r.Counts) > 0 {
		b.WriteString(code(Sparkline(r.Counts), 2*engine.ArrivalBuckets) + " ")
	}
	fmt.Fprintf(&b, "*%s* × %s", num(r.Messages), code(name, 300))
	if byGroup && r.GroupID != "" {
		b.WriteString(" · id " + code(r.GroupID, 20))
	}
	if r.Messages > r.Undated {
		b.WriteString("\nfirst " + date(r.First) + " · last " + ago(a.Now.Sub(r.Last)) + " · " + arrivingText(r, a))
	}
	if r.Undated > 0 {
		fmt.Fprintf(&b, " · %s without a failure time", num(r.Undated))
	}
	return b.String()
}

// arrivingText says whether failures are still arriving.
func arrivingText(r engine.ArrivalRow, a *engine.Arrivals) string {
	if r.StillArriving() {
		return fmt.Sprintf(":red_circle: *still arriving*: %s in the last %s", num(r.Recent), Width(a.RecentWindow))
	}
	return fmt.Sprintf("none in the last %s", Width(a.RecentWindow))
}

// Width names a bucket width or window in words: "5 min", "1 hour",
// "6 hours", "1 day", "7 days".
func Width(d time.Duration) string {
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return plural(int(d/(24*time.Hour)), "day", "days")
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int(d/time.Hour), "hour", "hours")
	case d >= time.Minute && d%time.Minute == 0:
		return num(int(d/time.Minute)) + " min"
	}
	return d.String()
}

// axisTime labels a sparkline's end in UTC: the time of day, with the date
// when the span is a day or more.
func axisTime(t time.Time, a *engine.Arrivals) string {
	if time.Duration(len(a.Counts))*a.Bucket >= 24*time.Hour {
		return t.UTC().Format("Jan 2 15:04") + " UTC"
	}
	return t.UTC().Format("15:04") + " UTC"
}

// ago words how long ago something was: "just now", "12m ago".
func ago(d time.Duration) string {
	if d < time.Minute {
		return "just now"
	}
	return span(d) + " ago"
}

// arrivalsFallback summarises the arrivals for the notification text.
func arrivalsFallback(a *engine.Arrivals) string {
	if a == nil || a.Messages == a.Undated {
		return ""
	}
	if a.StillArriving() {
		return fmt.Sprintf("; still arriving (%s in the last %s)", num(a.Recent), Width(a.RecentWindow))
	}
	return "; last failure " + ago(a.Now.Sub(a.Last))
}
