package engine

import (
	"slices"
	"sort"
)

// ConcernFirst returns a copy of targets in the order a person should read
// them: missing queues first, then names that mix scripts (to check by
// eye, never among those a long list cuts), then queues without consumers
// or whose consumers were not restarted since the failures, then the
// rest; each group by messages, most first. Every front end lists targets
// in this order.
func ConcernFirst(targets []TargetView) []TargetView {
	ts := slices.Clone(targets)
	rank := func(t TargetView) int {
		switch {
		case !t.Exists:
			return 0
		case MixedScripts(t.Queue) != "":
			return 1
		case t.Consumers == 0, t.ConsumersSinceFailure == SinceUnchanged:
			return 2
		}
		return 3
	}
	sort.SliceStable(ts, func(i, j int) bool {
		if ri, rj := rank(ts[i]), rank(ts[j]); ri != rj {
			return ri < rj
		}
		return ts[i].Messages > ts[j].Messages
	})
	return ts
}
