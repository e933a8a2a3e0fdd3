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
				ConsumersSinceFailure: engine.SinceRestarted, LastFailure: failed,
				ConsumerConns: []engine.ConsumerConn{{ConnectedAt: now.Add(-time.Minute), Product: "billing-service", Version: "2.0.1"}}},
		},
	}
}

// TestUnchangedLine: the card says first what would go wrong with the
// consumers that failed these messages, in the words, and the
// details mark each target with what the verdict was judged from, as the
// terminal does (TestPrintUnchanged): the latest failure, when the
// consumers connected, and what a restarted consumer's client calls
// itself; the card carries none of those times.
func TestUnchangedLine(t *testing.T) {
	p := previewUnchanged()
	card := string(marshal(t, rendered(Preview(p, fixedNow()))))
	details := string(marshal(t, rendered(PreviewDetails(p))))
	want := ":rotating_light: *Consumers not restarted* — `orders`: its 3 consumers have been connected since before these messages failed (orders-service 1.4.2) — is the fix deployed?"
	if !strings.Contains(card, want) {
		t.Errorf("card lacks %q:\n%s", want, card)
	}
	orders, billing := p.Targets[0], p.Targets[1]
	failed := dateSecs(orders.LastFailure)
	for _, w := range []string{
		"`orders` — 3 consumers, *not restarted since the failures* (latest failure " + failed + "; connected " + dateSecs(orders.ConsumerConns[0].ConnectedAt) + ")",
		"`billing` — 1 consumer, restarted since the failures (latest failure " + failed + "; connected " + dateSecs(billing.ConsumerConns[0].ConnectedAt) + "; restarted as billing-service 2.0.1)",
	} {
		if !strings.Contains(details, w) {
			t.Errorf("details lack %q:\n%s", w, details)
		}
	}
	if strings.Contains(card, "latest failure") || !strings.Contains(card, ":white_check_mark: `billing` has consumers") {
		t.Errorf("the card carries the targets' times, or does not say billing has consumers:\n%s", card)
	}
	// A token keeps the verdict, not the times: the line says no more.
	kept := engine.TargetView{Queue: "orders", Exists: true, Consumers: 3, Messages: 50, ConsumersSinceFailure: engine.SinceUnchanged}
	if l := targetLine(kept); !strings.HasSuffix(l, "*not restarted since the failures* · 50 messages") {
		t.Errorf("a kept verdict's line %q", l)
	}
	// Five consumers connected at four times: the earliest three, then
	// how many more.
	f := orders.LastFailure
	orders.ConsumerConns = nil
	for _, before := range []time.Duration{time.Minute, 3 * time.Hour, 2 * time.Minute, 3 * time.Hour, 10 * time.Minute} {
		orders.ConsumerConns = append(orders.ConsumerConns, engine.ConsumerConn{ConnectedAt: f.Add(-before)})
	}
	want = "; connected " + dateSecs(f.Add(-3*time.Hour)) + ", " + dateSecs(f.Add(-10*time.Minute)) + ", " + dateSecs(f.Add(-2*time.Minute)) + ", +1 more)"
	if l := targetLine(orders); !strings.Contains(l, want) {
		t.Errorf("five consumers at four times: %q, want %q", l, want)
	}
}
