package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// TestPrintUnchanged: the terminal report leads its problems with the
// consumers that were not restarted, and its targets table gives each
// target's verdict, the latest failure and the consumers' connections.
func TestPrintUnchanged(t *testing.T) {
	failed := time.Date(2026, 12, 6, 7, 30, 12, 0, time.UTC)
	p := &engine.Preview{DLQ: engine.QueueInfo{Name: "orders.dlq", Exists: true}, Selected: 50, Distinct: 50,
		Problems: []engine.Problem{{Kind: engine.ProblemConsumersUnchanged, Queue: "orders", Messages: 50,
			Detail: "orders: its consumer has been connected since before these messages failed (the latest at 2026-12-06T07:30:12Z) — is the fix deployed?"}},
		Targets: []engine.TargetView{{Queue: "orders", Exists: true, Consumers: 1, Messages: 50, ConsumersSinceFailure: engine.SinceUnchanged, LastFailure: failed,
			ConsumerConns: []engine.ConsumerConn{{ConnectedAt: failed.Add(-time.Hour), Product: "orders-service", Version: "1.4.2", ConnectionName: "orders-worker"}}}},
	}
	var b bytes.Buffer
	printPreview(&b, p)
	out := b.String()
	for _, want := range []string{
		"\n  ! orders: its consumer has been connected since before these messages failed",
		"SINCE FAILURE",
		"unchanged",
		"2026-12-06 07:30:12Z",
		"orders: a consumer connected 2026-12-06 06:30:12Z (orders-service 1.4.2, orders-worker)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
