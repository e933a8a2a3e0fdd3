package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/internal/testkit"
)

// dlqbot runs the binary's run() in-process with env overrides and returns
// stdout, stderr and the exit status.
func dlqbot(t testing.TB, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	var out, errw bytes.Buffer
	getenv := func(k string) string { return env[k] }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := run(ctx, args, &out, &errw, getenv)
	return out.String(), errw.String(), exitCode(err)
}

// testSigningKey signs the records of every dlqbot a test runs.
const testSigningKey = "cmd-test-signing-key-0123456789abcdef"

// testEnv is the operator's direct mode on the test's own Redis prefix:
// the broker's and Redis's addresses, the signing key, and
// DLQBOT_ACCESS=open (without a permissions file the terminal and
// `dlqbot mcp` act directly only with it).
//
// Its management API timeout is 30 s, not 5: the suite's brokers hold the
// queues of every test running at once, and listing them all (list,
// preview's dead-letter checks) can take longer than 5 s while the machine
// is loaded; no test here is about that timeout.
func testEnv(t testing.TB) map[string]string { return testEnvOn(t, testkit.Rabbit3) }

// testEnvOn is testEnv against the broker on.
func testEnvOn(t testing.TB, on testkit.Broker) map[string]string {
	_, prefix := testkit.Redis(t)
	return map[string]string{"DLQBOT_REDIS_PREFIX": prefix, "AMQP_URL": on.AMQPURL, "RABBITMQ_MANAGEMENT_URL": on.ManagementURL, "REDIS_URL": testkit.RedisURL,
		"RABBITMQ_MANAGEMENT_TIMEOUT": "30s", "DLQBOT_SIGNING_KEY": testSigningKey, "DLQBOT_ACCESS": "open"}
}

func oneJSON(t testing.TB, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("stdout is not a JSON document: %v\n%s", err, s)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON document:\n%s", s)
	}
	return doc
}

func TestTerminalPreviewReplayStatus(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(12, 100)...)
	r.WaitCount(dlq, 12, 20*time.Second)
	r.Consume(src, func(amqp.Delivery) string { return "ack" })

	out, _, code := dlqbot(t, env, "preview", dlq, "--json")
	if code != 0 {
		t.Fatalf("preview exit %d:\n%s", code, out)
	}
	doc := oneJSON(t, out)
	token, _ := doc["token"].(string)
	if token == "" || doc["selected"].(float64) != 12 {
		t.Fatalf("preview document: token %q selected %v", token, doc["selected"])
	}

	text, _, code := dlqbot(t, env, "preview", dlq, "limit=2")
	if code != 0 || !strings.Contains(text, "Token: p_") || !strings.Contains(text, "2 selected") {
		t.Fatalf("text preview (exit %d):\n%s", code, text)
	}

	out, stderr, code := dlqbot(t, env, "--json", "replay", token, "step=5", "rate=max", "timeout=20s")
	if code != 0 {
		t.Fatalf("replay exit %d:\n%s\n%s", code, out, stderr)
	}
	doc = oneJSON(t, out)
	if doc["state"] != "finished" || doc["replay_id"] == "" || doc["sent"].(float64) != 12 {
		t.Fatalf("replay document: %v", doc)
	}
	id := doc["replay_id"].(string)
	out, _, code = dlqbot(t, env, "status", id, "--json")
	if code != 0 || oneJSON(t, out)["state"] != "finished" {
		t.Fatalf("status exit %d: %s", code, out)
	}
	// The token is spent.
	out, _, code = dlqbot(t, env, "replay", token, "--json")
	if doc := oneJSON(t, out); code != 1 || !strings.Contains(doc["error"].(string), "already approved") || doc["code"] != "token_used" {
		t.Fatalf("second replay exit %d: %s", code, out)
	}
}

// TestTerminalReplayReadsItsDLQOnce replays a classic DLQ fed through the
// default exchange at the terminal: the approval compares it with the
// preview by reading it (fewer messages than the statistics prove), and
// the replay, run in the same process, begins from that read
// (Tune.KeepReads): the replay process's own count of deliveries from the
// DLQ, logged at exit with --verbose, is the DLQ's size, not twice it. The
// DLQ ends empty and the consumer got every message.
func TestTerminalReplayReadsItsDLQOnce(t *testing.T) {
	t.Parallel()
	const n = 40
	env := testEnv(t)
	r := testkit.Dial(t)
	src, dlq := r.DeadLetteredAs(nil, n, 100)
	var mu sync.Mutex
	got := 0
	r.Consume(src, func(amqp.Delivery) string {
		mu.Lock()
		defer mu.Unlock()
		got++
		return "ack"
	})
	out, _, code := dlqbot(t, env, "preview", dlq, "--json")
	token, _ := oneJSON(t, out)["token"].(string)
	if code != 0 || token == "" {
		t.Fatalf("preview exit %d:\n%s", code, out)
	}
	out, stderr, code := dlqbot(t, env, "--json", "--verbose", "replay", token, "rate=max")
	if doc := oneJSON(t, out); code != 0 || doc["state"] != "finished" || doc["sent"].(float64) != n {
		t.Fatalf("replay exit %d: %v\n%s", code, doc, stderr)
	}
	delivered := int64(-1)
	for _, line := range strings.Split(stderr, "\n") {
		var l struct {
			Msg        string `json:"message"`
			Queue      string `json:"queue"`
			Deliveries int64  `json:"deliveries"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "amqp: deliveries received" && l.Queue == dlq {
			delivered = l.Deliveries
		}
	}
	if delivered != n {
		t.Fatalf("the replay process received %d deliveries from the DLQ of %d: want %d, its approval's read alone\n%s", delivered, n, n, stderr)
	}
	testkit.Eventually(t, 30*time.Second, "every message at the consumer, the DLQ empty", func() bool {
		mu.Lock()
		defer mu.Unlock()
		ready, consumers := r.Look(dlq)
		return got == n && ready == 0 && consumers == 0
	})
}

// TestTerminalPreviewEndsWithTheDLQAsItFoundIt previews a quorum DLQ of
// 3,000 at the terminal. The broker applies the preview's give-back after
// its read's channels closed, a quorum queue in bursts, and the next
// command runs in a new process that cannot know it is still landing: the
// preview waits for it before it exits, so the moment it returns the DLQ
// counts every message ready again, with no consumer.
func TestTerminalPreviewEndsWithTheDLQAsItFoundIt(t *testing.T) {
	t.Parallel()
	const n = 3000
	env := testEnv(t)
	r := testkit.Dial(t)
	_, dlq := r.DeadLetteredAs(amqp.Table{"x-queue-type": "quorum"}, n, 100)
	out, stderr, code := dlqbot(t, env, "preview", dlq, "--json")
	if doc := oneJSON(t, out); code != 0 || doc["selected"].(float64) != n {
		t.Fatalf("preview exit %d: selected %v\n%s", code, doc["selected"], stderr)
	}
	if ready, consumers := r.Look(dlq); ready != n || consumers != 0 {
		t.Fatalf("right after the preview the DLQ holds %d ready with %d consumer(s); want all %d, none\n%s", ready, consumers, n, stderr)
	}
}

func TestTerminalBadInput(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	cases := []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"malformed filter", env, []string{"preview", "orders.dlq", "resaon=rejected", "--json"}, 2, "resaon"},
		{"unknown subcommand", env, []string{"frobnicate", "--json"}, 2, "frobnicate"},
		{"unknown queue", env, []string{"preview", testkit.Name("nope"), "--json"}, 1, "There is no queue"},
		{"unknown token", env, []string{"replay", "p_doesnotexist000000000", "--json"}, 1, "unknown or has expired"},
		{"unreachable broker", merge(env, "AMQP_URL", "amqp://guest:guest@127.0.0.1:1/"), []string{"preview", "x.dlq", "--json"}, 1, "broker unavailable"},
		{"unreachable redis", merge(env, "REDIS_URL", "redis://127.0.0.1:1/0"), []string{"preview", "x.dlq", "--json"}, 1, "store unavailable"},
	}
	for _, c := range cases {
		out, _, code := dlqbot(t, c.env, c.args...)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d\n%s", c.name, code, c.code, out)
			continue
		}
		msg, _ := oneJSON(t, out)["error"].(string)
		if !strings.Contains(msg, c.want) {
			t.Errorf("%s: error %q does not mention %q", c.name, msg, c.want)
		}
	}
	out, _, code := dlqbot(t, env, "help")
	if code != 0 || !strings.Contains(out, "dlqbot preview") {
		t.Errorf("help exit %d:\n%s", code, out)
	}
}

func merge(env map[string]string, k, v string) map[string]string {
	out := map[string]string{}
	for a, b := range env {
		out[a] = b
	}
	out[k] = v
	return out
}
