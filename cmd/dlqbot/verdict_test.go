package main

import (
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/internal/testkit"
)

// A replay's JSON document carries its verdict beside its state, and replay
// and resume exit 0 only for one that finished clean: one that stopped on
// copies that came back, and one resumed to its end with them, exit 1.
func TestTerminalVerdictAndExitStatus(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	r := testkit.Dial(t)

	// Clean: every copy is taken by a consumer that acks.
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(4, 100)...)
	r.WaitCount(dlq, 4, 20*time.Second)
	r.Consume(src, func(amqp.Delivery) string { return "ack" })
	doc := replayJSON(t, env, dlq, 0)
	if doc["state"] != "finished" || doc["verdict"] != "clean" {
		t.Fatalf("clean replay: state %v verdict %v, want finished clean", doc["state"], doc["verdict"])
	}

	// Came back: the consumer rejects every copy, so each is dead-lettered
	// again with the replay's id.
	src2, dlq2 := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src2, dlq2, nil)
	r.Reject(src2, testkit.Msgs(4, 100)...)
	r.WaitCount(dlq2, 4, 20*time.Second)
	r.Consume(src2, func(amqp.Delivery) string { return "reject" })
	doc = replayJSON(t, env, dlq2, 1)
	if doc["verdict"] != "came_back" || doc["state"] == "finished" {
		t.Fatalf("replay with returns: state %v verdict %v, want stopped came_back", doc["state"], doc["verdict"])
	}
	id := doc["replay_id"].(string)
	out, stderr, code := dlqbot(t, env, "resume", id, "--json")
	doc = oneJSON(t, out)
	if code != 1 || doc["state"] != "finished" || doc["verdict"] != "came_back" {
		t.Fatalf("resume to the end with returns: exit %d (want 1), state %v verdict %v\n%s\n%s", code, doc["state"], doc["verdict"], out, stderr)
	}
}

// replayJSON previews all of dlq, replays it in one step and returns the
// replay's document, failing unless the exit status is code.
func replayJSON(t *testing.T, env map[string]string, dlq string, code int) map[string]any {
	t.Helper()
	out, _, c := dlqbot(t, env, "preview", dlq, "--json")
	if c != 0 {
		t.Fatalf("preview exit %d:\n%s", c, out)
	}
	token, _ := oneJSON(t, out)["token"].(string)
	out, stderr, c := dlqbot(t, env, "--json", "replay", token, "step=4", "rate=max", "timeout=20s")
	if c != code || !strings.Contains(out, `"verdict"`) {
		t.Fatalf("replay exit %d, want %d:\n%s\n%s", c, code, out, stderr)
	}
	return oneJSON(t, out)
}
