package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestServeAPIAndStdioMCP runs the real binary: `dlqbot serve` with a
// permissions file serves the API (401 without a token), and `dlqbot mcp`
// on stdio, acting as the principal of DLQBOT_MCP_TOKEN, approves a
// terminal preview's token; serve's worker runs the replay, and the API
// and the metrics show it.
func TestServeAPIAndStdioMCP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10)
	const token = "cmd-test-token-ops-42"
	perm := filepath.Join(t.TempDir(), "permissions.yaml")
	if err := os.WriteFile(perm, []byte(`principals:
  - name: ops
    token_sha256: `+commands.HashToken(token)+`
roles:
  - name: ops
    principals: [ops]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := merge(f.env, "DLQBOT_PERMISSIONS", perm)
	addr := freeAddr(t)
	start(t, merge(env, "DLQBOT_HTTP_ADDR", addr), "serve")
	base := "http://" + addr
	testkit.Eventually(t, 20*time.Second, "/healthz", func() bool { c, _ := get(base + "/healthz"); return c == 200 })
	if c, body := get(base + "/api/v1/replays"); c != http.StatusUnauthorized || !strings.Contains(body, `"unauthorized"`) {
		t.Fatalf("no bearer token: %d %s", c, body)
	}

	cmd := exec.Command(os.Args[0], "mcp")
	cmd.Env = append(os.Environ(), "DLQBOT_RUN_MAIN=1", "DLQBOT_MCP_TOKEN="+token)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if os.Getenv("DLQBOT_TEST_LOG") != "" {
		cmd.Stderr = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := sdk.NewClient(&sdk.Implementation{Name: "cmd-test", Version: "v0"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "dlq_replay", Arguments: map[string]any{"token": f.token, "rate": "max"}})
	if err != nil || res.IsError {
		t.Fatalf("dlq_replay: %v %+v", err, res)
	}
	data, _ := json.Marshal(res.StructuredContent)
	var r engine.Replay
	if err := json.Unmarshal(data, &r); err != nil || r.ID == "" || r.Approver != "api:ops" {
		t.Fatalf("dlq_replay answered %s (%v)", data, err)
	}
	testkit.Eventually(t, 60*time.Second, "the API to show the replay finished", func() bool {
		req, _ := http.NewRequest("GET", base+"/api/v1/replays/"+r.ID, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var cur engine.Replay
		return json.NewDecoder(resp.Body).Decode(&cur) == nil && cur.State == engine.StateFinished && cur.Sent == 10
	})
	testkit.Eventually(t, 20*time.Second, "the metrics to count it", func() bool {
		_, body := get(base + "/metrics")
		return strings.Contains(body, `dlqbot_replay_events_total{event="finished"} 1`)
	})
	if n := f.rabbit.Count(f.dlq); n != 0 {
		t.Fatalf("%d left in the DLQ", n)
	}
}

// TestMCPStdioNeedsAPrincipal: with a permissions file, `dlqbot mcp`
// refuses to start (exit 2) without the token of a principal.
func TestMCPStdioNeedsAPrincipal(t *testing.T) {
	t.Parallel()
	perm := filepath.Join(t.TempDir(), "permissions.yaml")
	if err := os.WriteFile(perm, []byte("principals:\n  - name: ops\n    token_sha256: "+commands.HashToken("x")+
		"\nroles:\n  - name: ops\n    principals: [ops]\n    grants:\n      - queues: [\"*\"]\n        actions: [read]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := merge(testEnv(t), "DLQBOT_PERMISSIONS", perm)
	for _, tok := range []string{"", "y"} {
		_, stderr, code := dlqbot(t, merge(env, "DLQBOT_MCP_TOKEN", tok), "mcp")
		if code != exitUsage || !strings.Contains(stderr, "DLQBOT_MCP_TOKEN must be the token of a principal") {
			t.Errorf("token %q: exit %d (want %d), stderr %q", tok, code, exitUsage, stderr)
		}
	}
}
