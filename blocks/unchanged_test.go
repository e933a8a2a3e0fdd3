package blocks

import (
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// previewUnchanged is a preview whose target orders's three consumers were
// all connected before its messages failed, beside a target restarted
// since.
func previewUnchanged() *engine.Preview {
	now := fixedNow()
	failed := now.Add(-20 * time.Minute).Truncate(time.Second)
	conns := func(at time.Time, n int) []engine.ConsumerConn {
		var cs []engine.ConsumerConn
		for range n {
			cs = append(cs, engine.ConsumerConn{ConnectedAt: at, Product: "orders-service", Version: "1.4.2", ConnectionName: "orders-worker"})
		}
		return cs
	}
	return &engine.Preview{
		Token: token, ExpiresAt: now.Add(24 * time.Hour).Format(time.RFC3339),
		DLQ:       engine.QueueInfo{Name: "orders.dlq", Exists: true, Ready: 60, Type: "classic"},
		Selection: "orders.dlq", Requester: asker, Scanned: 60, Selected: 60, Distinct: 60, FirstStepDepth: 10, CanaryClasses: 2, Classes: 2,
		Problems: []engine.Problem{{Kind: engine.ProblemConsumersUnchanged, Queue: "orders", Messages: 50,
			Detail: "orders: its 3 consumers have been connected since before these messages failed (the latest at " + failed.Format(time.RFC3339) + ") — is the fix deployed?"}},
		Targets: []engine.TargetView{
			{Queue: "orders", Exists: true, Consumers: 3, Messages: 50, Reasons: map[engine.Reason]int{engine.ReasonRejected: 50},
				ConsumersSinceFailure: engine.SinceUnchanged, LastFailure: failed, ConsumerConns: conns(now.Add(-3*time.Hour), 3)},
			{Queue: "billing", Exists: true, Consumers: 1, Messages: 10, Reasons: map[engine.Reason]int{engine.ReasonRejected: 10},
				ConsumersSinceFailure: engine.SinceRestarted, LastFailure: failed, ConsumerConns: conns(now.Add(-time.Minute), 1)},
		},
	}
}

// TestUnchangedLine: the card says first what would go wrong with the
// consumers that failed these messages, in the words, and marks
// the target.
func TestUnchangedLine(t *testing.T) {
	p := previewUnchanged()
	text := problemsText(p) + "\n" + targetsText(p.Targets)
	want := ":rotating_light: *Consumers not restarted* — `orders`: its 3 consumers have been connected since before these messages failed (orders-service 1.4.2) — is the fix deployed?"
	if !strings.Contains(text, want) {
		t.Errorf("card lacks %q:\n%s", want, text)
	}
	for _, w := range []string{"`orders` — 3 consumers, *not restarted since the failures*", "`billing` — 1 consumer, restarted since the failures"} {
		if !strings.Contains(text, w) {
			t.Errorf("card lacks %q:\n%s", w, text)
		}
	}
}
