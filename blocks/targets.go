package blocks

import (
	"fmt"
	"sort"
	"strings"

	"github.com/stroma/dlqbot/engine"
)

// targetsText summarises the target queues, those with problems first.
func targetsText(targets []engine.TargetView) string {
	ts := append([]engine.TargetView(nil), targets...)
	rank := func(t engine.TargetView) int {
		switch {
		case !t.Exists:
			return 0
		case t.Consumers == 0:
			return 1
		}
		return 2
	}
	sort.SliceStable(ts, func(i, j int) bool {
		if ri, rj := rank(ts[i]), rank(ts[j]); ri != rj {
			return ri < rj
		}
		return ts[i].Messages > ts[j].Messages
	})
	lines := make([]string, 0, maxTargets)
	for _, t := range ts[:min(len(ts), maxTargets)] {
		lines = append(lines, targetLine(t))
	}
	head := fmt.Sprintf("*Targets* (%s)", plural(len(ts), "queue", "queues"))
	return list(head, lines, len(ts), MaxSectionText, func(hidden int) string {
		n := 0
		for _, t := range ts[len(ts)-hidden:] {
			n += t.Messages
		}
		return fmt.Sprintf("…and %s (%s)", plural(hidden, "more queue", "more queues"), msgs(n))
	})
}

func targetLine(t engine.TargetView) string {
	state := ":white_check_mark: " + code(t.Queue, 120) + " — " + plural(t.Consumers, "consumer", "consumers")
	switch {
	case !t.Exists:
		state = ":x: " + code(t.Queue, 120) + " — *does not exist*"
	case t.Consumers == 0:
		state = ":warning: " + code(t.Queue, 120) + " — *no consumers*"
	}
	return state + " · " + msgs(t.Messages) + reasons(t.Reasons)
}

// reasons lists dead-letter reasons by count: " (100 rejected, 20 expired)".
func reasons(rs map[engine.Reason]int) string {
	type rc struct {
		r engine.Reason
		n int
	}
	var all []rc
	for r, n := range rs {
		all = append(all, rc{r, n})
	}
	if len(all) == 0 {
		return ""
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].r < all[j].r
	})
	var parts []string
	for _, x := range all[:min(len(all), 3)] {
		parts = append(parts, num(x.n)+" "+esc(oneLine(string(x.r)), 30))
	}
	if len(all) > 3 {
		parts = append(parts, plural(len(all)-3, "more reason", "more reasons"))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
