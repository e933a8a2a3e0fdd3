package main

import (
	"context"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestDemoTrafficFinishesOneSourceAndStopsTheOther runs the demo's seeded
// DLQ and consumers through the terminal front end: replaying the orders
// finishes, replaying the payments stops on the currency it still rejects,
// and check groups what came back.
func TestDemoTrafficFinishesOneSourceAndStopsTheOther(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	q := newDemoQueues(testkit.Name("demo"))
	for _, name := range []string{q.DLQ, q.Orders, q.Payments, q.DLQ + ".parking"} {
		t.Cleanup(func() { testkit.DeleteQueue(name) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := startDemoTraffic(ctx, env["AMQP_URL"], q); err != nil {
		t.Fatal(err)
	}
	r := testkit.Dial(t)
	r.WaitCount(q.DLQ, 80, 20*time.Second)

	out, _, code := dlqbot(t, env, "preview", q.DLQ, "source="+q.Orders, "--json")
	if code != 0 {
		t.Fatalf("preview orders: %s", out)
	}
	doc := oneJSON(t, out)
	if doc["selected"].(float64) != 50 {
		t.Fatalf("orders selected %v, want 45 rejected + 5 Spring failures", doc["selected"])
	}
	out, _, code = dlqbot(t, env, "replay", doc["token"].(string), "rate=max", "timeout=30s", "--json")
	if code != 0 || oneJSON(t, out)["state"] != string(engine.StateFinished) {
		t.Fatalf("orders replay exit %d: %s", code, out)
	}

	out, _, _ = dlqbot(t, env, "preview", q.DLQ, "source="+q.Payments, "--json")
	token := oneJSON(t, out)["token"].(string)
	out, _, code = dlqbot(t, env, "replay", token, "rate=max", "timeout=30s", "--json")
	doc = oneJSON(t, out)
	if code != 1 || doc["state"] != string(engine.StateStopped) || doc["returned"].(float64) == 0 {
		t.Fatalf("payments replay exit %d: %s", code, out)
	}
	out, _, code = dlqbot(t, env, "check", doc["replay_id"].(string), "--json")
	c := oneJSON(t, out)
	if code != 0 || c["returned"].(float64) == 0 || len(c["groups"].([]any)) != 1 {
		t.Fatalf("check exit %d: %s", code, out)
	}
}
