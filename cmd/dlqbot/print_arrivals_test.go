package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// TestPrintArrivals checks the terminal's arrivals: the overall sparkline
// with first, last and still arriving, the undated count, and one row per
// failure group with the id group= takes.
func TestPrintArrivals(t *testing.T) {
	now := time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)
	start := now.Add(-2 * time.Hour)
	burst := []int{0, 2, 19, 14, 6, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	still := []int{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 1, 0, 1, 2, 0, 3, 1, 2, 0, 2, 1, 2}
	all := make([]int, len(burst))
	for i := range all {
		all[i] = burst[i] + still[i]
	}
	g1, g2 := "order <n> not found", "currency XTS not supported"
	p := &engine.Preview{DLQ: engine.QueueInfo{Name: "orders.dlq", Exists: true}, Selection: "orders.dlq reason=exception",
		Arrivals: &engine.Arrivals{Start: start, Bucket: 5 * time.Minute, Now: now, RecentWindow: engine.ArrivalsRecent,
			ArrivalRow: engine.ArrivalRow{Messages: 69, Undated: 3, Recent: 3, First: start.Add(5 * time.Minute), Last: now.Add(-time.Minute), Counts: all},
			Groups: []engine.ArrivalRow{
				{Key: g1, GroupID: engine.GroupID(g1), Messages: 45, First: start.Add(5 * time.Minute), Last: start.Add(34 * time.Minute), Counts: burst},
				{Key: g2, GroupID: engine.GroupID(g2), Messages: 24, Undated: 3, Recent: 3, First: start.Add(45 * time.Minute), Last: now.Add(-time.Minute), Counts: still},
			}}}
	var buf bytes.Buffer
	printPreview(&buf, p)
	out := buf.String()
	for _, want := range []string{
		"Dead-lettered 07:30 → 09:30 UTC, each bar 5 min:",
		"66 message(s), first 2026-03-14 07:35:00Z, last 2026-03-14 09:29:00Z; STILL ARRIVING: 3 in the last 5 min",
		"3 message(s) without a failure time",
		"By failure group:",
		engine.GroupID(g1) + "  order <n> not found",
		"first Mar 14 07:35, last 1h 26m ago, none in the last 5 min",
		"last 1m ago, STILL ARRIVING: 3 in the last 5 min, 3 without a failure time",
		"Preview one group: dlqbot preview orders.dlq reason=exception group=<id>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if !strings.Contains(out, "·▁█▆▃▂▁") {
		t.Errorf("no sparkline of the burst in\n%s", out)
	}
}
