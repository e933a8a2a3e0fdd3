package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// With no worker running, `dlqbot resume` runs the replay itself, as
// `dlqbot replay` does, and exits with the replay's outcome (1 here: copies
// came back in its first step); it used to enqueue a job nobody ran and
// exit 0.
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
	// Finished, but the 5 of the first step came back: not clean, exit 1.
	if code != 1 || doc["state"] != "finished" || doc["verdict"] != "came_back" || doc["sent"].(float64) != 30 {
		t.Fatalf("resume exit %d, want 1 and finished (came_back) with 30 sent:\n%s\n%s", code, out, stderr)
	}
	testkit.Eventually(t, 20*time.Second, "the target to get the other 25", func() bool { n, _ := acks.Counts(); return n == 25 })
	if n := r.Count(dlq); n != 5 { // only the 5 that came back in the first step
		t.Fatalf("DLQ holds %d after the resumed replay, want the 5 returned copies", n)
	}
}

// Interrupting a terminal that runs the replay itself leaves it paused
// with the lease released; `dlqbot resume` with a worker running hands it
// to the worker and follows it to its end (it used to exit 0 at once).
func TestTerminalResumeHandsToAWorkerAndFollows(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 200)
	runner := start(t, f.env, "replay", f.token, "step=200", "cap=200", "rate=50", "timeout=20s", "--json")
	id := f.replayID(t)
	f.waitDelivered(t, 20)
	if err := runner.Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-runner.Done
	rep, err := f.st.Replays().Get(context.Background(), id)
	if err != nil || rep.State != engine.StatePaused || rep.Sent == 200 {
		t.Fatalf("after Ctrl-C: %v, %s with %d sent: want paused midway", err, rep.State, rep.Sent)
	}
	if owner, _ := f.st.Leases().Owner(context.Background(), id); owner != "" {
		t.Fatalf("lease still held by %s after Ctrl-C", owner)
	}

	start(t, merge(f.env, "DLQBOT_HTTP_ADDR", freeAddr(t)), "serve")
	testkit.Eventually(t, 20*time.Second, "the worker announced", func() bool {
		ws, _ := f.st.Workers().List(context.Background())
		return len(ws) == 1
	})
	out, stderr, code := dlqbot(t, f.env, "resume", id, "--json")
	doc := oneJSON(t, out)
	if code != 0 || doc["state"] != "finished" || doc["sent"].(float64) != 200 {
		t.Fatalf("resume exit %d, want 0 and finished with 200 sent:\n%s\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "handed to 1 worker") {
		t.Errorf("the resume did not go to the worker:\n%s", stderr)
	}
	if dups := f.accountFor(t, id); len(dups) != 0 {
		t.Errorf("pause and resume duplicated %d message(s)", len(dups))
	}
}
