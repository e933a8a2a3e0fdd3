package main

import (
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// TestPrintInterruptedSuggestsTerminalPreview: the terminal names its own
// command ("dlqbot preview …") for previewing the rest of an interrupted
// replay, from the replay's RestSelection, not a Slack "/dlq" text.
func TestPrintInterruptedSuggestsTerminalPreview(t *testing.T) {
	var b strings.Builder
	printReplay(&b, engine.Replay{ID: "r_1", DLQ: "orders.dlq", State: engine.StateInterrupted,
		Note: "the rest are still in orders.dlq.", RestSelection: "orders.dlq reason=rejected"})
	if !strings.Contains(b.String(), "dlqbot preview orders.dlq reason=rejected") || strings.Contains(b.String(), "/dlq") {
		t.Errorf("interrupted replay printed as:\n%s", b.String())
	}
}
