package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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
	if c, _ := get("http://" + down + "/healthz"); c != 200 {
		t.Fatalf("/healthz %d without Redis: liveness must not depend on Redis", c)
	}
}
