package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// TestProgressLineShowsPace: the terminal's progress line and status say
// how a running auto-paced replay paces.
func TestProgressLineShowsPace(t *testing.T) {
	pace := "pacing to the consumer: 48 msg/s; backlog 30"
	r := engine.Replay{ID: "r_1", DLQ: "orders.dlq", State: engine.StateRunning, Total: 100, Sent: 40, Pace: pace}
	if line := progressLine(r, time.Unix(100, 0), false); !strings.Contains(line, pace) {
		t.Fatalf("progress line %q does not show %q", line, pace)
	}
	var b bytes.Buffer
	printReplay(&b, r)
	if !strings.Contains(b.String(), pace) {
		t.Fatalf("status does not show %q:\n%s", pace, b.String())
	}
}
