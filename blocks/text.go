package blocks

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stroma/dlqbot/engine"
)

// ellipsis marks text that was cut short.
const ellipsis = "…"

// graveSubstitute replaces backticks inside code formatting: Slack's mrkdwn
// has no escape for a backtick, and a literal one would end the code span.
const graveSubstitute = "ˋ"

// escapeRune returns r as it must appear in mrkdwn text: &, < and > as
// entities, a backtick as a look-alike.
func escapeRune(r rune) string {
	if r == '`' {
		return graveSubstitute
	}
	return entity(r)
}

// entity returns r with &, < and > as entities.
func entity(r rune) string {
	switch r {
	case '&':
		return "&amp;"
	case '<':
		return "&lt;"
	case '>':
		return "&gt;"
	}
	return string(r)
}

// escape escapes the three characters that mrkdwn treats as control
// characters (&, < and >), so text cannot mention, link or notify, and
// replaces backticks, so text cannot open or close code formatting.
func escape(s string) string {
	if !strings.ContainsAny(s, "&<>`") {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		b.WriteString(escapeRune(r))
	}
	return b.String()
}

// esc escapes s for mrkdwn and shortens the escaped text to at most max
// characters, ending it with "…" when cut. It never splits an entity.
func esc(s string, max int) string { return escWith(s, max, escapeRune) }

// escKeepCode is esc for text that is already mrkdwn (a refusal written
// by the commands package): it escapes &, < and > but keeps backticks, so
// the text's code formatting stays.
func escKeepCode(s string, max int) string { return escWith(s, max, entity) }

func escWith(s string, max int, one func(rune) string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		p := one(r)
		b.WriteString(p)
		n += utf8.RuneCountInString(p)
	}
	if n <= max {
		return b.String()
	}
	if max <= 0 {
		return ""
	}
	b.Reset()
	n = 0
	for _, r := range s {
		p := one(r)
		w := utf8.RuneCountInString(p)
		if n+w > max-1 {
			break
		}
		b.WriteString(p)
		n += w
	}
	return b.String() + ellipsis
}

// clip shortens s to at most max characters, ending it with "…" when cut.
// It does not escape: use it on text that is already safe mrkdwn or plain
// text.
func clip(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	if max <= 0 {
		return ""
	}
	n := 0
	for i := range s {
		if n == max-1 {
			return s[:i] + ellipsis
		}
		n++
	}
	return s
}

// oneLine collapses every run of whitespace, newlines included, into one
// space.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// printable replaces control characters (other than the line breaks and
// tabs keep allows) and invalid UTF-8 with '.', so binary payloads cannot
// garble a message.
func printable(s string, keep string) string {
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || r == 0x7f || (r < 0x20 && !strings.ContainsRune(keep, r)) {
			return '.'
		}
		return r
	}, s)
}

// code renders s as inline code of at most max characters (backticks
// included), on one line, escaped.
func code(s string, max int) string {
	s = oneLine(printable(s, "\t\n\r"))
	if s == "" {
		return "`(empty)`"
	}
	return "`" + esc(s, max-2) + "`"
}

// codeBlock renders s as a preformatted block of at most max characters
// (fences included), escaped. Line breaks are kept.
func codeBlock(s string, max int) string {
	s = strings.ReplaceAll(s, "\r", "")
	s = printable(strings.Trim(s, "\n"), "\t\n")
	if strings.TrimSpace(s) == "" {
		return "```(empty)```"
	}
	return "```" + esc(s, max-6) + "```"
}

// num formats n with thousands separators: 100000 → "100,000".
func num(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// plural returns "1 message" or "2 messages" (with thousands separators).
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return num(n) + " " + many
}

// msgs is plural(n, "message", "messages").
func msgs(n int) string { return plural(n, "message", "messages") }

// bar draws a text progress bar of width cells with the percentage:
// "▰▰▰▱▱▱▱▱▱▱ 30%". It reaches 100% only when done ≥ total.
func bar(done, total, width int) string {
	if total <= 0 {
		return strings.Repeat("▱", width) + " 0%"
	}
	done = min(max(done, 0), total)
	filled := done * width / total
	pct := done * 100 / total
	return strings.Repeat("▰", filled) + strings.Repeat("▱", width-filled) + fmt.Sprintf(" %d%%", pct)
}

// who renders a requester or approver: a Slack user id becomes a mention,
// anything else (a terminal user, say) escaped text.
func who(user string) string {
	if user == "" {
		return "unknown"
	}
	if isUserID(user) {
		return "<@" + user + ">"
	}
	return esc(oneLine(user), 80)
}

// isUserID reports whether s looks like a Slack user id (U… or W…,
// upper-case letters and digits).
func isUserID(s string) bool {
	if len(s) < 9 || len(s) > 20 || (s[0] != 'U' && s[0] != 'W') {
		return false
	}
	for _, c := range s {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// date renders t with Slack's date formatting, shown in each reader's time
// zone, with a UTC fallback for clients that cannot.
func date(t time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
}

// span formats a positive duration coarsely: "1d 2h", "23h 59m", "5m",
// "45s".
func span(d time.Duration) string {
	switch {
	case d >= 24*time.Hour:
		if h := d % (24 * time.Hour) / time.Hour; h > 0 {
			return fmt.Sprintf("%dd %dh", d/(24*time.Hour), h)
		}
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d >= time.Hour:
		return fmt.Sprintf("%dh %dm", d/time.Hour, d%time.Hour/time.Minute)
	case d >= time.Minute:
		return fmt.Sprintf("%dm", d/time.Minute)
	default:
		return fmt.Sprintf("%ds", max(d/time.Second, 0))
	}
}

// seconds formats a step's duration: "12.3s".
func seconds(d time.Duration) string {
	return d.Round(100 * time.Millisecond).String()
}

// paceText says how a replay with p paces: a fixed rate, unpaced, or
// paced to the consumer (rate=auto) up to its max.
func paceText(p engine.Params) string {
	r := p.Rate
	if p.Auto && r >= 0 {
		m := p.Max
		if m <= 0 {
			m = engine.DefaultAutoMax
		}
		return "paced to the consumer, up to " + strconv.FormatFloat(m, 'f', -1, 64) + " msg/s"
	}
	if r < 0 {
		return "unpaced"
	}
	return strconv.FormatFloat(r, 'f', -1, 64) + " msg/s"
}

// list joins head and lines into one mrkdwn text of at most max
// characters. total is how many items exist (lines may hold only the first
// few); when items are left out, more(hidden) describes them on a last
// line.
func list(head string, lines []string, total, max int, more func(hidden int) string) string {
	const reserve = 200 // room for the "and N more" line
	var b strings.Builder
	b.WriteString(head)
	n := utf8.RuneCountInString(head)
	shown := 0
	for _, l := range lines {
		w := utf8.RuneCountInString(l) + 1
		if n+w > max-reserve && !(shown == total-1 && n+w <= max) {
			break
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
		n += w
		shown++
	}
	if hidden := total - shown; hidden > 0 && more != nil {
		b.WriteString("\n" + clip(more(hidden), reserve-1))
	}
	return clip(b.String(), max)
}

// pick returns one when n is 1, else many.
func pick(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Verb forms agreeing with a count.
func doesDo(n int) string  { return pick(n, "does", "do") }
func hasHave(n int) string { return pick(n, "has", "have") }
func wasWere(n int) string { return pick(n, "was", "were") }
func isAre(n int) string   { return pick(n, "is", "are") }
