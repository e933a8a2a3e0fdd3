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
// raise an argument's limit; the replay stops by the budget (exit 1) with
// nothing lost; a preview is then refused with the reason, reading nothing.
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

		out, _, code = dlqbot(t, env, "--json", "replay", token, "step=2", "cap=2", "rate=max", "timeout=20s")
		doc = oneJSON(t, out)
		note, _ := doc["note"].(string)
		if code != 1 || doc["state"] != "stopped" || !strings.Contains(note, "read budget") {
			t.Fatalf("replay (exit %d): %s", code, out)
		}
		// Two previews and the approval's check (count 3), step 1 (5), then
		// 6 − 1 − 5 < 2: stopped after 2 sent.
		sent := int(doc["sent"].(float64))
		if sent != 2 {
			t.Fatalf("replay sent %d, want 2 (one step): %s", sent, out)
		}
		testkit.Eventually(t, 20*time.Second, "sent copies consumed", func() bool { a, _ := consumer.Counts(); return a == sent })
		testkit.Eventually(t, 30*time.Second, "nothing lost", func() bool { return r.Count(dlq)+sent == 10 })

		// The approval reads the DLQ only when its proof could not show
		// nothing changed (engine/proof/proof.go), so the budget left is one
		// read more or less: either the preview is refused before it
		// reads, or it reads and warns of what is left.
		out, _, code = dlqbot(t, env, "preview", dlq, "--json")
		doc = oneJSON(t, out)
		msg, _ := doc["error"].(string)
		refused := code == 1 && strings.Contains(msg, "read budget") && strings.Contains(msg, "nothing was read")
		if !refused && (code != 0 || doc["read_budget"] == nil) {
			t.Fatalf("preview with the budget (nearly) spent (exit %d): %s; want refused, or a read_budget warning", code, out)
		}
		if n := r.Count(dlq); n+sent != 10 {
			t.Fatalf("DLQ holds %d after the refused preview, %d sent: want 10 in all", n, sent)
		}
	})
}
