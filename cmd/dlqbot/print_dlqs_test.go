package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/ops"
)

// TestPrintDLQsArrivals: a DLQ's arrivals read as a count, "since HH:MM
// UTC" when the broker's samples cover less than the hour, or "unknown",
// at the terminal and in Slack; a DLQ never previewed says so for its
// top group.
func TestPrintDLQsArrivals(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	twelve, three := 12, 3
	d := ops.DLQs{Note: ops.DLQsNote, DLQs: []ops.DLQ{
		{Name: "orders.dlq", Messages: 40, ArrivalsLastHour: &twelve,
			TopGroup: &ops.TopGroup{GroupID: "g3f2a", Type: "Orders.TimeoutException", Messages: 30, SeenAt: now.Add(-2 * time.Hour)}},
		{Name: "billing.dlq", Messages: 5, ArrivalsLastHour: &three, ArrivalsSince: now.Add(-20 * time.Minute)},
		{Name: "audit.dlq", Messages: 1},
	}}
	var buf bytes.Buffer
	printDLQs(&buf, d, now)
	text := buf.String()
	for _, want := range []string{"ARRIVED IN THE LAST HOUR", "g3f2a Orders.TimeoutException (30 at the preview 2 h ago)", "3 since 08:40 UTC", "unknown", "not previewed"} {
		if !strings.Contains(text, want) {
			t.Errorf("the terminal's list lacks %q:\n%s", want, text)
		}
	}
	slack := bot.DLQListText(d, "/dlq", now)
	for _, want := range []string{"12 arrived in the last hour · top group `g3f2a` `Orders.TimeoutException` (30 at the preview 2 h ago)",
		"3 arrived since 08:40 UTC", "arrivals in the last hour unknown"} {
		if !strings.Contains(slack, want) {
			t.Errorf("Slack's list lacks %q:\n%s", want, slack)
		}
	}
}
