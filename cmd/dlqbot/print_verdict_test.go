package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// verdictPreview is a preview of 48 messages from orders.dlq to one
// target with consumers, recent failures (within the recent window)
// counted in recent.
func verdictPreview(recent int) *engine.Preview {
	now := time.Date(2026, 12, 6, 9, 30, 0, 0, time.UTC)
	return &engine.Preview{DLQ: engine.QueueInfo{Name: "orders.dlq", Exists: true, Ready: 48}, Selection: "orders.dlq", Token: "p_verdict",
		Scanned: 48, Selected: 48, Distinct: 48,
		Targets: []engine.TargetView{{Queue: "orders", Exists: true, Consumers: 2, Messages: 48, ConsumersSinceFailure: engine.SinceRestarted}},
		Arrivals: &engine.Arrivals{Start: now.Add(-time.Hour), Bucket: 5 * time.Minute, Now: now, RecentWindow: engine.ArrivalsRecent,
			ArrivalRow: engine.ArrivalRow{Messages: 48, Recent: recent, First: now.Add(-time.Hour), Last: now.Add(-time.Minute), Counts: make([]int, 12)}}}
}

// TestPrintPreviewLeadsWithVerdict: the readable preview's first line is
// its verdict, counted as Slack's card counts it — failures still
// arriving are a problem, listed with the others before the numbers — and
// a preview without problems says it is safe to replay.
func TestPrintPreviewLeadsWithVerdict(t *testing.T) {
	var b bytes.Buffer
	printPreview(&b, verdictPreview(3))
	out := b.String()
	first, _, _ := strings.Cut(out, "\n")
	if first != "1 problem: 48 message(s) from orders.dlq to 1 target queue" {
		t.Errorf("first line %q, want the headline counting still arriving:\n%s", first, out)
	}
	if strings.Contains(out, "Nothing looks wrong") {
		t.Errorf("a preview whose failures are still arriving says nothing looks wrong:\n%s", out)
	}
	still := strings.Index(out, "  ! Still arriving: 3 in the last 5 min")
	numbers := strings.Index(out, "Scanned 48 message(s)")
	if still < 0 || numbers < 0 || still > numbers {
		t.Errorf("want still arriving among the problems, before the numbers (at %d, numbers at %d):\n%s", still, numbers, out)
	}

	b.Reset()
	printPreview(&b, verdictPreview(0))
	out = b.String()
	first, _, _ = strings.Cut(out, "\n")
	if first != "Safe to replay: 48 message(s) from orders.dlq to 1 target queue" {
		t.Errorf("first line %q, want safe to replay:\n%s", first, out)
	}
	if strings.Contains(out, "  ! ") {
		t.Errorf("a clean preview lists a problem:\n%s", out)
	}
}
