package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	dlqamqp "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestAPIAndMCPWhenUnchangedSecondPerson runs the real binary: with
// approval.when_unchanged: second_person, a principal previews through
// the API, then through MCP, a DLQ whose messages its work queue's one
// consumer rejected (and still runs): each preview's JSON says unchanged
// for the target and leads its problems with consumers_unchanged; the
// same principal's approval is refused needs_second_person by each (403,
// MCP's [needs_second_person]), and nothing is sent.
func TestAPIAndMCPWhenUnchangedSecondPerson(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Consume(src, func(amqp.Delivery) string { return "reject" })

	b, err := dlqamqp.New(dlqamqp.Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	var opened time.Time
	testkit.Eventually(t, 30*time.Second, "the management API to date the consumer's connection", func() bool {
		cs, err := b.QueueConsumers(context.Background(), src)
		if err == nil && len(cs) == 1 {
			opened = cs[0].ConnectedAt
		}
		return !opened.IsZero()
	})
	next := opened.Truncate(time.Second).Add(time.Second)
	testkit.Eventually(t, 3*time.Second, "the clock to pass the connection's second", func() bool { return !time.Now().Before(next) })
	r.Publish(src, testkit.Msgs(10, 100)...)
	r.WaitCount(dlq, 10, 20*time.Second)

	const token = "cmd-test-token-unchanged-7"
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
approval:
  when_unchanged: second_person
`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	start(t, merge(merge(env, "DLQBOT_PERMISSIONS", perm), "DLQBOT_HTTP_ADDR", addr), "serve")
	base := "http://" + addr
	testkit.Eventually(t, 20*time.Second, "/healthz", func() bool { c, _ := get(base + "/healthz"); return c == 200 })
	post := func(path string, body any) (int, []byte) {
		data, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", base+path, bytes.NewReader(data))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}

	// unchanged reads a preview's JSON and checks it leads with the
	// target's unchanged consumers; it returns the preview's token.
	unchanged := func(via string, body []byte) string {
		t.Helper()
		var p struct {
			Token    string `json:"token"`
			Problems []struct {
				Kind  engine.ProblemKind `json:"kind"`
				Queue string             `json:"queue"`
			} `json:"problems"`
			Targets []struct {
				Queue       string                `json:"queue"`
				Since       engine.Since          `json:"consumers_since_failure"`
				LastFailure time.Time             `json:"last_failure"`
				Conns       []engine.ConsumerConn `json:"consumer_connections"`
			} `json:"targets"`
		}
		if json.Unmarshal(body, &p) != nil || p.Token == "" {
			t.Fatalf("%s preview: %s", via, body)
		}
		if len(p.Targets) != 1 || p.Targets[0].Since != engine.SinceUnchanged || p.Targets[0].LastFailure.IsZero() ||
			len(p.Targets[0].Conns) != 1 || !p.Targets[0].Conns[0].ConnectedAt.Equal(opened) {
			t.Fatalf("%s preview targets: %s", via, body)
		}
		if len(p.Problems) == 0 || p.Problems[0].Kind != engine.ProblemConsumersUnchanged || p.Problems[0].Queue != src {
			t.Fatalf("%s preview problems: %s", via, body)
		}
		return p.Token
	}

	code, body := post("/api/v1/previews", map[string]string{"selection": dlq})
	if code != http.StatusCreated {
		t.Fatalf("preview: %d %s", code, body)
	}
	tok := unchanged("API", body)
	code, body = post("/api/v1/previews/"+tok+"/approve", map[string]any{"rate": "max"})
	var refusal struct {
		Code string `json:"code"`
	}
	if code != http.StatusForbidden || json.Unmarshal(body, &refusal) != nil || refusal.Code != "needs_second_person" {
		t.Fatalf("the requester's own approval: %d %s, want 403 needs_second_person", code, body)
	}

	s := mcpSession(t, base, token)
	defer s.Close()
	res, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: "dlq_preview", Arguments: map[string]any{"selection": dlq}})
	if err != nil || res.IsError {
		t.Fatalf("dlq_preview: %v %+v", err, res)
	}
	body, _ = json.Marshal(res.StructuredContent)
	tok = unchanged("MCP", body)
	if got := mcpTool(t, base, token, "dlq_replay", map[string]any{"token": tok, "rate": "max"}); got != "needs_second_person" {
		t.Fatalf("the requester's own approval through MCP: %s, want needs_second_person", got)
	}
	if n := r.Count(dlq); n != 10 {
		t.Fatalf("%d in the DLQ after the refused approvals, want all 10", n)
	}
}
