package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
)

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeHealthReadinessMetrics checks serve's operational endpoints:
// /healthz, /readyz (RabbitMQ and Redis reachable, 503 otherwise) and
// /metrics with the replay and scan series after a replay.
func TestServeHealthReadinessMetrics(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 20)
	addr := freeAddr(t)
	start(t, merge(f.env, "DLQBOT_HTTP_ADDR", addr), "serve")
	base := "http://" + addr
	testkit.Eventually(t, 20*time.Second, "/healthz", func() bool { c, _ := get(base + "/healthz"); return c == 200 })
	if c, body := get(base + "/readyz"); c != 200 {
		t.Fatalf("/readyz %d: %s", c, body)
	}
	out, _, code := dlqbot(t, f.env, "replay", f.token, "rate=max", "--json")
	if code != 0 {
		t.Fatalf("replay: %s", out)
	}
	testkit.Eventually(t, 20*time.Second, "replay metrics", func() bool {
		_, body := get(base + "/metrics")
		return strings.Contains(body, `dlqbot_replay_events_total{event="finished"} 1`) &&
			strings.Contains(body, "dlqbot_messages_sent_total 20") && strings.Contains(body, "go_goroutines")
	})

	down := freeAddr(t)
	start(t, merge(merge(f.env, "DLQBOT_HTTP_ADDR", down), "REDIS_URL", "redis://127.0.0.1:1/0"), "serve")
	testkit.Eventually(t, 20*time.Second, "/readyz 503 without Redis", func() bool {
		c, body := get("http://" + down + "/readyz")
		return c == http.StatusServiceUnavailable && strings.Contains(body, "redis")
	})
	// What is down, never why: the error names hosts and accounts.
	if _, body := get("http://" + down + "/readyz"); !strings.Contains(body, "redis: not reachable") || !strings.Contains(body, "request id req_") ||
		strings.Contains(body, "127.0.0.1:1") || strings.Contains(body, "refused") {
		t.Errorf("/readyz without Redis says:\n%s", body)
	}
	if c, _ := get("http://" + down + "/healthz"); c != 200 {
		t.Fatalf("/healthz %d without Redis: liveness must not depend on Redis", c)
	}
}

// TestServeIsClosedByDefault: `dlqbot serve` with Slack configured and no
// permissions file exits with status 2 and a sentence naming
// DLQBOT_ACCESS=open, listening on nothing; with DLQBOT_ACCESS=open it
// serves, and /dlq help says access control is off. A value other than
// open is a usage error naming the variable.
func TestServeIsClosedByDefault(t *testing.T) {
	t.Parallel()
	env := merge(merge(testEnv(t), "SLACK_BOT_TOKEN", "xoxb-closed"), "SLACK_SIGNING_SECRET", "closed-secret")
	delete(env, "DLQBOT_ACCESS")
	addr := freeAddr(t)
	_, stderr, code := dlqbot(t, merge(env, "DLQBOT_HTTP_ADDR", addr), "serve")
	if code != exitUsage || !strings.Contains(stderr, "DLQBOT_ACCESS=open") || !strings.Contains(stderr, "DLQBOT_PERMISSIONS") {
		t.Fatalf("serve without a policy: exit %d, stderr %q", code, stderr)
	}
	if c, _ := get("http://" + addr + "/healthz"); c != 0 {
		t.Fatalf("a refused serve answered /healthz (%d)", c)
	}
	if _, stderr, code := dlqbot(t, merge(env, "DLQBOT_ACCESS", "yes"), "serve"); code != exitUsage || !strings.Contains(stderr, "DLQBOT_ACCESS") {
		t.Fatalf("DLQBOT_ACCESS=yes: exit %d, stderr %q", code, stderr)
	}
	stub := slackstub.New("closed-secret")
	t.Cleanup(stub.Close)
	open := merge(merge(merge(env, "DLQBOT_ACCESS", "open"), "DLQBOT_HTTP_ADDR", addr), "SLACK_API_URL", stub.APIURL())
	start(t, open, "serve")
	testkit.Eventually(t, 20*time.Second, "/healthz", func() bool { c, _ := get("http://" + addr + "/healthz"); return c == 200 })
	resp, err := stub.SlashCommand("http://"+addr, "/dlq", "help", "U0ANYONE01", "C0OPEN")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "Access control is off") {
		t.Fatalf("help with DLQBOT_ACCESS=open: %s", body)
	}
}
