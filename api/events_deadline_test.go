package api

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// statusEngine answers Status for one running replay; nothing else.
type statusEngine struct{ ops.Engine }

func (statusEngine) Status(_ context.Context, id string) (engine.Replay, error) {
	return engine.Replay{ID: id, DLQ: "orders.dlq", State: engine.StateRunning}, nil
}

// lateLog has no event until after, then the replay's final one.
type lateLog struct {
	after time.Time
	reads atomic.Int64
}

func (*lateLog) Append(context.Context, engine.Event) error { return nil }

func (l *lateLog) Read(_ context.Context, id, after string, _ int) ([]string, []engine.Event, error) {
	l.reads.Add(1)
	if time.Now().Before(l.after) || after != "" {
		return nil, nil, nil
	}
	return []string{"1-0"}, []engine.Event{{Kind: engine.EventFinished, Replay: engine.Replay{ID: id, State: engine.StateFinished}}}, nil
}

// TestEventStreamOutlivesTheWriteTimeout: behind a server whose write
// timeout is 300ms, an event stream keeps its connection (keep-alives)
// until the replay's final event, 1.5s in, and ends with "end".
func TestEventStreamOutlivesTheWriteTimeout(t *testing.T) {
	t.Parallel()
	p, err := commands.ParsePolicy([]byte(`principals:
  - name: ci
    token_sha256: ` + commands.HashToken("s3cret") + `
roles:
  - name: ci
    principals: [ci]
    grants:
      - queues: ["*"]
        actions: [read]
`))
	if err != nil {
		t.Fatal(err)
	}
	log := &lateLog{after: time.Now().Add(1500 * time.Millisecond)}
	o, err := ops.New(ops.Config{Policy: p}, ops.Deps{Engine: statusEngine{}, Tokens: nothing{}, Replays: nothing{}, Windows: nothing{}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{EventPoll: 20 * time.Millisecond, Heartbeat: 100 * time.Millisecond},
		Deps{Ops: o, Events: log, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Config.WriteTimeout = 300 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)

	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/replays/r_stream/events", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	took := time.Since(start)
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, "event: end") || took < time.Second {
		t.Fatalf("the stream ended after %s without its end event (the write timeout cut it?):\n%s", took, all)
	}
	if n := strings.Count(all, ": keep-alive"); n < 3 {
		t.Errorf("%d keep-alives in %s, want several", n, took)
	}
}
