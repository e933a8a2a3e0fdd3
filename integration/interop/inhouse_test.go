package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/internal/testkit"
)

var (
	buildOnce sync.Once
	binPath   string
	buildOut  []byte
	buildErr  error
)

// dlqbotBinary builds cmd/dlqbot once per test binary.
func dlqbotBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := filepath.Abs(filepath.Join("..", "..", "bin"))
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "dlqbot-interop")
		buildOut, buildErr = exec.Command("go", "build", "-o", binPath, "../../cmd/dlqbot").CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/dlqbot: %v\n%s", buildErr, buildOut)
	}
	return binPath
}

// terminal runs `dlqbot args… --json` with env and decodes its one JSON
// document; it returns the document and the exit status.
func terminal(t *testing.T, env []string, args ...string) (map[string]any, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, dlqbotBinary(t), append(args, "--json")...)
	cmd.Env = env
	var out, errw bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errw
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("dlqbot %v: %v", args, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("dlqbot %v (exit %d): stdout is not one JSON document: %v\n%s\n%s", args, code, err, out.String(), errw.String())
	}
	return doc, code
}

// TestInteropInHouseDialect: an in-house retry framework (on amqplib)
// records its failures in its own headers and publishes them to the DLQ
// itself. With DLQBOT_DIALECT_HEADERS naming those headers, the dlqbot
// binary's preview, replay and check say what the framework did: source,
// attempts, error group, returns without x-death (each copy retried afresh:
// the replay resets the framework's attempts), and a finished replay to the
// fixed handler.
func TestInteropInHouseDialect(t *testing.T) {
	t.Parallel()
	requireSetup(t)
	// Classic queues, and the framework's own headers: one broker
	// (testkit.ClassicOn), all three with DLQBOT_CLASSIC_ALL=1.
	testkit.EachBrokerIn(t, testkit.ClassicOn(t.Name()), func(t *testing.T, b testkit.Broker) {
		t.Parallel()
		const n = 6
		e := newEnv(t, b, fast)
		src, dlq := testkit.Name("app"), testkit.Name("app-dlq")
		e.rabbit.Queue(src, nil)
		e.rabbit.Queue(dlq, nil)
		_, prefix := testkit.Redis(t)
		env := []string{"AMQP_URL=" + b.AMQPURL, "RABBITMQ_MANAGEMENT_URL=" + b.ManagementURL, "REDIS_URL=" + testkit.RedisURL,
			"DLQBOT_REDIS_PREFIX=" + prefix, "DLQBOT_DIALECT_HEADERS=source=x-app-source,exception=x-app-error,attempts=x-app-attempts",
			"DLQBOT_ACCESS=open"} // the operator's direct mode
		node := func(fail bool) *consumer {
			return startNode(t, b, map[string]any{"lib": "inhouse", "queue": src, "dlq": dlq, "fail": fail})
		}

		c := node(true)
		bodies := publishN(t, e.rabbit, src, n)
		e.rabbit.WaitCount(dlq, n, 60*time.Second)
		c.stop()
		if got := e.rabbit.Count(src); got != 0 {
			t.Fatalf("the framework left %d messages in %s when it stopped", got, src)
		}
		tries := perMessage(c.handled(nil))

		doc, code := terminal(t, env, "preview", dlq)
		msgs, _ := doc["messages"].([]any)
		if code != 0 || doc["selected"] != float64(n) || len(msgs) != n {
			t.Fatalf("preview (exit %d): %v", code, doc)
		}
		for _, x := range msgs {
			m := x.(map[string]any)
			id, _ := m["message_id"].(string)
			if m["dialect"] != "inhouse" || m["source"] != src || m["reason"] != "exception" ||
				m["failure_group"] != rascalGroup || m["attempts"] != float64(tries[id]) || tries[id] != 3 {
				t.Errorf("preview of %s (handled %d times): %v", id, tries[id], m)
			}
		}

		// Still failing: every copy comes back (no x-death: the framework
		// published it), the replay stops and check groups them.
		c = node(true)
		doc, code = terminal(t, env, "replay", doc["token"].(string), "step=100", "rate=max", "timeout=45s")
		id, _ := doc["replay_id"].(string)
		if code != 1 || doc["state"] != "stopped" || id == "" {
			t.Errorf("replay to the failing handler (exit %d): %v", code, doc)
		}
		// Until every copy is back; a failure says where the copies were
		// (this wait once ran out beside make test's other lanes).
		for deadline := time.Now().Add(3 * time.Minute); e.rabbit.Count(dlq) != n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after 3m the DLQ holds %d of %d, the source %d; replay %v; the handler saw %d deliveries of the replay's copies; its output:\n%s",
					e.rabbit.Count(dlq), n, e.rabbit.Count(src), doc, len(c.handled(func(ev event) bool { return ev.ReplayID == id })), c.output())
			}
		}
		c.stop()
		// The copies started fresh for the framework (the replay removed its
		// attempts and error headers): each was retried as often as at first.
		if got := perMessage(c.handled(func(ev event) bool { return ev.ReplayID == id })); len(got) != n {
			t.Errorf("the handler saw %d of %d replayed copies", len(got), n)
		} else {
			for mid, k := range got {
				if k != tries[mid] {
					t.Errorf("replayed %s: handled %d times, %d the first time", mid, k, tries[mid])
				}
			}
		}
		testkit.Eventually(t, 60*time.Second, "check to count every return", func() bool {
			doc, code = terminal(t, env, "check", id)
			return code == 0 && doc["returned"] == float64(n)
		})
		groups, _ := doc["groups"].([]any)
		if len(groups) != 1 || groups[0].(map[string]any)["group"] != rascalGroup {
			t.Errorf("check groups: %v", doc["groups"])
		}

		// Fixed: the replay finishes and the handler got every copy.
		c = node(false)
		doc, _ = terminal(t, env, "preview", dlq)
		doc, code = terminal(t, env, "replay", doc["token"].(string), "step=100", "rate=max", "timeout=45s")
		if code != 0 || doc["state"] != "finished" || doc["sent"] != float64(n) {
			t.Errorf("replay to the fixed handler (exit %d): %v", code, doc)
		}
		e.rabbit.WaitCount(dlq, 0, 30*time.Second)
		e.rabbit.WaitCount(src, 0, 30*time.Second)
		c.stop()
		fixed := c.handled(func(ev event) bool { return ev.ReplayID == doc["replay_id"] })
		for _, ev := range fixed {
			if ev.BodySHA256 != sha(bodies[ev.MessageID]) || ev.ReplayedFrom != src {
				t.Errorf("fixed handler got %+v", ev)
			}
		}
		if len(perMessage(fixed)) != n || len(fixed) != n {
			t.Errorf("the fixed handler got %d copies of %d messages, want %d", len(fixed), len(perMessage(fixed)), n)
		}
	})
}
