package main

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/internal/testkit"
)

// With no worker running, `dlqbot resume` runs the replay itself, as
// `dlqbot replay` does (SPEC §10), and exits with the replay's outcome; it
// used to enqueue a job nobody ran and exit 0.
func TestTerminalResumeRunsTheReplayWithoutWorkers(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	r := testkit.Dial(t)
	src, dlq := r.DeadLettered(30, 50)
	rejecting := r.Consume(src, func(amqp.Delivery) string { return "reject" })

	out, _, code := dlqbot(t, env, "preview", dlq, "--json")
	if code != 0 {
		t.Fatalf("preview exit %d:\n%s", code, out)
	}
	token, _ := oneJSON(t, out)["token"].(string)
	out, stderr, code := dlqbot(t, env, "replay", token, "step=5", "cap=100", "rate=max", "timeout=20s", "--json")
	doc := oneJSON(t, out)
	if code != 1 || doc["state"] != "stopped" || doc["sent"].(float64) != 5 {
		t.Fatalf("replay exit %d, want 1 and stopped after 5:\n%s\n%s", code, out, stderr)
	}
	id := doc["replay_id"].(string)

	// The consumer is fixed; resume from the terminal, no worker running.
	rejecting.Stop()
	acks := r.Consume(src, func(amqp.Delivery) string { return "ack" })
	out, stderr, code = dlqbot(t, env, "resume", id, "--json")
	doc = oneJSON(t, out)
	if code != 0 || doc["state"] != "finished" || doc["sent"].(float64) != 30 {
		t.Fatalf("resume exit %d, want 0 and finished with 30 sent:\n%s\n%s", code, out, stderr)
	}
	testkit.Eventually(t, 20*time.Second, "the target to get the other 25", func() bool { n, _ := acks.Counts(); return n == 25 })
	if n := r.Count(dlq); n != 5 { // only the 5 that came back in the first step
		t.Fatalf("DLQ holds %d after the resumed replay, want the 5 returned copies", n)
	}
}
