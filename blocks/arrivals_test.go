package blocks

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
)

func TestSparkline(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{
		{nil, ""},
		{[]int{0, 0}, "··"},
		{[]int{1}, "█"},
		{[]int{0, 1, 2, 3, 4, 5, 6, 7, 8}, "·▁▂▃▄▅▆▇█"},
		{[]int{1, 1000000}, "▁█"}, // anything at all is at least ▁
		{[]int{-3, 4}, "·█"},
	} {
		if got := Sparkline(c.in); got != c.want {
			t.Errorf("Sparkline(%v) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := Width(5 * time.Minute); got != "5 min" {
		t.Errorf("Width = %q", got)
	}
	if got := Width(48 * time.Hour); got != "2 days" {
		t.Errorf("Width = %q", got)
	}
}

// bigArrivals is a worst case of arrivals for n messages: every bucket
// full, the most rows, 200-character group names that need escaping.
func bigArrivals(n int) *engine.Arrivals {
	long := strings.Repeat("<&>`", 50)
	counts := func(k int) []int {
		c := make([]int, engine.ArrivalBuckets)
		for i := range c {
			c[i] = k / engine.ArrivalBuckets
		}
		c[0] += k % engine.ArrivalBuckets
		return c
	}
	now := fixedNow()
	row := func(key string, k int) engine.ArrivalRow {
		return engine.ArrivalRow{Key: key, GroupID: engine.GroupID(key), Messages: k, Undated: k / 10, Recent: k / 3,
			First: now.Add(-time.Hour), Last: now, Counts: counts(k - k/10)}
	}
	a := &engine.Arrivals{Start: now.Add(-48 * time.Hour), Bucket: time.Hour, Now: now, RecentWindow: engine.ArrivalsRecent,
		ArrivalRow: row("", n), MoreGroups: n / 2, MoreSources: n / 2}
	for i := range engine.ArrivalRows {
		a.Groups = append(a.Groups, row(fmt.Sprintf("%d%s", i, long)[:200], max(n/40, 1)))
		a.Sources = append(a.Sources, row(longName(i), max(n/40, 1)))
	}
	return a
}

// TestLimitsArrivals renders previews and their details with arrivals of
// 1 to 1,000,000 messages, the most rows, the longest names and a
// selection too long for a button, and checks them against Block Kit's
// limits; the card has a button for each group it lists.
func TestLimitsArrivals(t *testing.T) {
	for _, n := range []int{1, 10, 1000, 1_000_000} {
		for _, longSel := range []bool{false, true} {
			p := bigPreview(min(n, 1000), 10)
			p.Arrivals = bigArrivals(n)
			if !longSel {
				p.Selection = "orders.dlq reason=rejected"
			}
			name := fmt.Sprintf("%d messages, long selection %v", n, longSel)
			b, text := Preview(p, fixedNow())
			mustValidate(t, name, b, text)
			groupButtons := 0
			for _, x := range b {
				if s, ok := x.(*slack.SectionBlock); ok && s.Accessory != nil && s.Accessory.ButtonElement != nil {
					groupButtons++
					if v := s.Accessory.ButtonElement.Value; utf8.RuneCountInString(v) > MaxButtonValue || !strings.Contains(v, " group=g") {
						t.Errorf("%s: group button value %q", name, v)
					}
				}
			}
			if want := maxCardGroups; !longSel && groupButtons != want {
				t.Errorf("%s: %d group buttons, want %d", name, groupButtons, want)
			}
			if longSel && groupButtons != 0 {
				t.Errorf("%s: %d group buttons with a selection too long for a button value", name, groupButtons)
			}
			mustValidate(t, name+" approved", rendered(PreviewApproved(p, approver, replayID)).blocks, "x")
			db, dtext := PreviewDetails(p)
			mustValidate(t, name+" details", db, dtext)
			// Undated only.
			p.Arrivals = &engine.Arrivals{Now: fixedNow(), RecentWindow: engine.ArrivalsRecent, ArrivalRow: engine.ArrivalRow{Messages: n, Undated: n, Counts: []int{}}}
			b, text = Preview(p, fixedNow())
			mustValidate(t, name+" undated", b, text)
		}
	}
}
