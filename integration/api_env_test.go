package integration_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/mcp"
)

// API principals' bearer tokens in these tests; the permissions file
// holds only their hashes.
const (
	tokRunbook = "tok-runbook-0123456789" // read, replay, publish
	tokViewer  = "tok-viewer-0123456789"  // read only
	tokAlice   = "tok-alice-0123456789"   // acts as Slack user U0ALICE001
	tokAgent   = "tok-agent-0123456789"   // read, replay, publish (the MCP agent)
	tokOther   = "tok-other-0123456789"   // read, replay, publish
	forged     = "tok-runbook-0123456788" // one character off
)

// apiPolicy is a permissions file with four principals and two Slack
// users; distinct approval is on when fourEyes.
func apiPolicy(fourEyes bool) string {
	p := `
principals:
  - name: runbook
    token_sha256: ` + commands.HashToken(tokRunbook) + `
  - name: viewer
    token_sha256: ` + commands.HashToken(tokViewer) + `
  - name: alice-cli
    token_sha256: ` + commands.HashToken(tokAlice) + `
    as_user: U0ALICE001
  - name: agent
    token_sha256: ` + commands.HashToken(tokAgent) + `
  - name: other
    token_sha256: ` + commands.HashToken(tokOther) + `
roles:
  - name: automation
    principals: [runbook, agent, other]
    users: [U0ALICE001, U0BOB00001]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
  - name: viewers
    principals: [viewer]
    grants:
      - queues: ["*"]
        actions: [read]
`
	if fourEyes {
		p += "approval:\n  require_distinct_approver: true\n"
	}
	return p
}

// apiEnv is an env with the HTTP API and the MCP endpoint served beside
// the Slack endpoints.
type apiEnv struct {
	*env
	api  *api.Service
	url  string
	logs *lockedBuffer // the API's and MCP's log lines
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the logged JSON lines that contain every one of want.
func (b *lockedBuffer) lines(want ...string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		ok := l != ""
		for _, w := range want {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

func newAPIEnv(t *testing.T, o options, mc mcp.Config) *apiEnv {
	t.Helper()
	o.events = true
	if o.apiChannel == "" {
		o.apiChannel = channel
	}
	o.requireHuman = o.requireHuman || mc.RequireHuman
	e := newEnv(t, o)
	logs := &lockedBuffer{}
	log := zerolog.New(io.MultiWriter(logs, logWriter())).With().Timestamp().Logger()
	svc, err := api.New(api.Config{EventPoll: 50 * time.Millisecond}, api.Deps{
		Ops: e.ops, Events: e.store.Events(), Slack: e.bot, Log: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", svc.Handler())
	mux.Handle("/mcp", mcp.Handler(svc, mc, log))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &apiEnv{env: e, api: svc, url: srv.URL, logs: logs}
}

// logWriter is stderr with DLQBOT_TEST_LOG set, else nothing.
func logWriter() io.Writer {
	if os.Getenv("DLQBOT_TEST_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}

// call makes an API call with bearer token tok ("" for none) and returns
// the status and the decoded JSON body.
func (a *apiEnv) call(tok, method, path string, body any) (int, map[string]any) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, a.url+path, rd)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	if len(data) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			a.t.Fatalf("%s %s: status %d, body not JSON: %s", method, path, resp.StatusCode, data)
		}
	}
	return resp.StatusCode, out
}

// mustCall is call that expects status want.
func (a *apiEnv) mustCall(want int, tok, method, path string, body any) map[string]any {
	a.t.Helper()
	status, out := a.call(tok, method, path, body)
	if status != want {
		a.t.Fatalf("%s %s: status %d, want %d: %v", method, path, status, want, out)
	}
	return out
}

// preview makes a preview through the API and returns its token.
func (a *apiEnv) preview(tok, selection string) string {
	a.t.Helper()
	out := a.mustCall(http.StatusCreated, tok, "POST", "/api/v1/previews", map[string]string{"selection": selection})
	token, _ := out["token"].(string)
	if !strings.HasPrefix(token, "p_") {
		a.t.Fatalf("preview without a token: %v", out)
	}
	return token
}

// sseEvent is one server-sent event.
type sseEvent struct {
	id, kind string
	data     json.RawMessage
}

// events reads replay id's event stream (after lastEventID, when set)
// until it ends, within the given time, and returns its events.
func (a *apiEnv) events(tok, id, lastEventID string, within time.Duration) []sseEvent {
	a.t.Helper()
	req, _ := http.NewRequest("GET", a.url+"/api/v1/replays/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	client := &http.Client{Timeout: within}
	resp, err := client.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		a.t.Fatalf("event stream: status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.kind != "" {
				out = append(out, cur)
				if cur.kind == "end" {
					return out
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.kind = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = json.RawMessage(line[6:])
		}
	}
	a.t.Fatalf("event stream ended without an end event (%v) after %d events", sc.Err(), len(out))
	return nil
}

// replayOf decodes a replay from an API body.
func replayOf(t *testing.T, body map[string]any) engine.Replay {
	t.Helper()
	data, _ := json.Marshal(body)
	var r engine.Replay
	if err := json.Unmarshal(data, &r); err != nil || r.ID == "" {
		t.Fatalf("not a replay: %v (%v)", body, err)
	}
	return r
}
