package dashboard

import (
	"fmt"
	"html/template"
	"slices"
	"strings"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"ago":   ago,
	"clock": func(t time.Time) string { return t.UTC().Format("15:04:05") },
	"stamp": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"rate":  rate,
	"pct": func(a, b int) int {
		if b <= 0 {
			return 0
		}
		return a * 100 / b
	},
	"badge":     badge,
	"badgeText": badgeText,
	"left":      func(r engine.Replay) int { return max(0, r.Total-r.Sent-r.Missing-r.Failed-r.InDoubt) },
	"origin":    origin,
	"dur":       func(d time.Duration) string { return d.Round(100 * time.Millisecond).String() },
	"list":      func(s ...string) []string { return s },
	"ctl": func(v replayView, csrf string) controlsView {
		return controlsView{ID: v.ID, CSRF: csrf, Controls: v.Controls}
	},
	"connected": connected,
	"mixes":     engine.MixedScripts,
}

// controlsView is what the controls template needs.
type controlsView struct {
	ID, CSRF string
	Controls []control
}

// origin is where a replay was started from: the front end its approval
// came through, else, for a record that does not name one, a guess from
// its requester's identity.
func origin(r engine.Replay) string {
	switch r.ApprovedVia {
	case "":
	case "slack":
		return "Slack"
	case "api":
		return "API"
	case "mcp":
		return "MCP"
	default:
		return r.ApprovedVia // terminal, dashboard
	}
	id := r.Requester
	switch {
	case strings.HasPrefix(id, "api:"):
		return "API / agent"
	case strings.HasPrefix(id, "terminal:"):
		return "terminal"
	case strings.HasPrefix(id, "mcp:"):
		return "MCP"
	case id == "":
		return ""
	}
	return "Slack"
}

// ago is how long before now t was, in a few characters.
func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.UTC().Format("2006-01-02")
}

// connected lists when a target's consumers connected: the distinct
// times, earliest first, at most three and how many more.
func connected(conns []engine.ConsumerConn) string {
	var seen []time.Time
	for _, c := range conns {
		if !c.ConnectedAt.IsZero() && !slices.ContainsFunc(seen, c.ConnectedAt.Equal) {
			seen = append(seen, c.ConnectedAt)
		}
	}
	slices.SortFunc(seen, time.Time.Compare)
	var out []string
	for _, at := range seen[:min(len(seen), 3)] {
		out = append(out, at.UTC().Format("2006-01-02 15:04:05Z"))
	}
	if len(seen) > 3 {
		out = append(out, fmt.Sprintf("+%d more", len(seen)-3))
	}
	return strings.Join(out, ", ")
}

// rate is how fast the replay has sent, in words.
func rate(r engine.Replay) string {
	end := r.UpdatedAt
	if !r.EndedAt.IsZero() {
		end = r.EndedAt
	}
	secs := end.Sub(r.CreatedAt).Seconds()
	if r.Sent == 0 || secs <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f/s", float64(r.Sent)/secs)
}

// sparkline draws counts as bars in an inline SVG (no style attributes,
// which the page's content security policy forbids).
func sparkline(counts []int) template.HTML {
	if len(counts) == 0 {
		return ""
	}
	top := 0
	for _, n := range counts {
		top = max(top, n)
	}
	const h, bw = 24, 4
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="spark" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="depth">`, len(counts)*bw, h, len(counts)*bw, h)
	for i, n := range counts {
		bh := 1
		cls := "idle"
		if n > 0 && top > 0 {
			bh = max(2, n*h/top)
			cls = "bar"
		}
		fmt.Fprintf(&b, `<rect class="%s" x="%d" y="%d" width="%d" height="%d"><title>%d</title></rect>`, cls, i*bw, h-bh, bw-1, bh, n)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built from numbers only
}

// badge is the class of a replay's state badge: its state, except that a
// finished replay with copies back, or with copies nobody could see, is
// its verdict (shown as a warning, never as a clean finish).
func badge(r engine.Replay) string {
	if r.State == engine.StateFinished && r.Verdict() != engine.VerdictClean {
		return string(r.Verdict())
	}
	return string(r.State)
}

// badgeText is the badge's words: "finished clean", "finished · 12 came
// back", "finished · could not tell", or the state.
func badgeText(r engine.Replay) string {
	if r.State != engine.StateFinished {
		return string(r.State)
	}
	switch r.Verdict() {
	case engine.VerdictCameBack:
		return fmt.Sprintf("finished · %d came back", r.Returned)
	case engine.VerdictCouldNotTell:
		return "finished · could not tell"
	}
	return "finished clean"
}
