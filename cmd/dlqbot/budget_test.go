package main

import (
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/internal/testkit"
)

// TestTerminalQuorumReadBudget: on a quorum DLQ with x-delivery-limit=6,
// the terminal preview states the read budget and that a policy cannot
// raise an argument's limit; the replay, which finds returns at the DLQ's
// tail instead of re-reading it, finishes within the budget, nothing lost.
// On RabbitMQ 4.3, which counts no give-back, there is no budget and the
// replay finishes.
func TestTerminalQuorumReadBudget(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		env := testEnv(t)
		env["AMQP_URL"], env["RABBITMQ_MANAGEMENT_URL"] = on.AMQPURL, on.ManagementURL
		r := on.Dial(t)
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.Topology(src, dlq, testkit.Quorum(amqp.Table{"x-delivery-limit": 6}))
		r.Reject(src, testkit.Msgs(10, 100)...)
		r.WaitCount(dlq, 10, 20*time.Second)
		consumer := r.Consume(src, func(amqp.Delivery) string { return "ack" })

		if !on.RequeueCounts() {
			// 4.3 counts no give-back: no budget, and the same replay
			// finishes with all ten sent.
			out, _, code := dlqbot(t, env, "preview", dlq, "--json")
			doc := oneJSON(t, out)
			token, _ := doc["token"].(string)
			if code != 0 || token == "" || doc["read_budget"] != nil {
				t.Fatalf("preview --json on 4.3 (exit %d), want no read budget: %s", code, out)
			}
			out, _, code = dlqbot(t, env, "--json", "replay", token, "step=2", "cap=2", "rate=max", "timeout=20s")
			doc = oneJSON(t, out)
			if sent, _ := doc["sent"].(float64); code != 0 || doc["state"] != "finished" || sent != 10 {
				t.Fatalf("replay on 4.3 (exit %d): %s; want finished with 10 sent", code, out)
			}
			testkit.Eventually(t, 20*time.Second, "all ten consumed", func() bool { a, _ := consumer.Counts(); return a == 10 })
			testkit.Eventually(t, 30*time.Second, "the DLQ empty", func() bool { return r.Count(dlq) == 0 })
			return
		}
		text, _, code := dlqbot(t, env, "preview", dlq)
		for _, w := range []string{"needs 3 reads", "leaves 4", "x-delivery-limit argument, which a policy cannot raise"} {
			if code != 0 || !strings.Contains(text, w) {
				t.Fatalf("preview (exit %d) lacks %q:\n%s", code, w, text)
			}
		}
		t.Logf("preview:\n%s", text)
		out, _, code := dlqbot(t, env, "preview", dlq, "--json")
		doc := oneJSON(t, out)
		token, _ := doc["token"].(string)
		if code != 0 || token == "" || doc["read_budget"] == nil {
			t.Fatalf("preview --json (exit %d): %s", code, out)
		}

		// The preview plans for the worst case (a re-read per step), but
		// the replay finds its returns at the DLQ's tail with its own read,
		// which holds what it passes without spending delivery attempts:
		// it reads the DLQ once and finishes within the budget, nothing
		// lost. (The stop by the budget, when reads are needed, is the
		// engine's TestReadBudgetStopsAndResumesOnceRaised.)
		out, _, code = dlqbot(t, env, "--json", "replay", token, "step=2", "cap=2", "rate=max", "timeout=20s")
		doc = oneJSON(t, out)
		if sent, _ := doc["sent"].(float64); code != 0 || doc["state"] != "finished" || sent != 10 {
			t.Fatalf("replay (exit %d): %s; want finished within the budget with 10 sent", code, out)
		}
		testkit.Eventually(t, 20*time.Second, "all ten consumed", func() bool { a, _ := consumer.Counts(); return a == 10 })
		testkit.Eventually(t, 30*time.Second, "the DLQ empty", func() bool { return r.Count(dlq) == 0 })
	})
}
