package integration_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/mcp"
)

// bearer adds an Authorization header to every request; the token can be
// swapped mid-session.
type bearer struct {
	token atomic.Pointer[string]
	next  http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+*b.token.Load())
	return b.next.RoundTrip(r)
}

// mcpClient connects an MCP client built on the same SDK to endpoint with
// bearer token tok, and returns the session and its bearer.
func mcpClient(t *testing.T, endpoint, tok string) (*sdk.ClientSession, *bearer, error) {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "dlqbot-test", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b := &bearer{next: http.DefaultTransport}
	b.token.Store(&tok)
	s, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: b}}, nil)
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, b, err
}

// callTool calls a tool and decodes its structured result into out; it
// returns the error text of a tool error.
func callTool(t *testing.T, s *sdk.ClientSession, name string, args map[string]any, out any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		var texts []string
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
		return strings.Join(texts, " ")
	}
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: result %s: %v", name, data, err)
	}
	return ""
}

// TestMCPTools: an MCP client on the official SDK lists dlqbot's tools
// over streamable HTTP with a principal's bearer token, previews (nothing
// changes) and replays the preview's token; a forged token cannot connect.
func TestMCPTools(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, options{policy: apiPolicy(false)}, mcp.Config{})
	src, dlq := dlqWith(e.env, 14)
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })

	if _, _, err := mcpClient(t, e.url+"/mcp", forged); err == nil {
		t.Fatal("a forged bearer token connected")
	}
	s, b, err := mcpClient(t, e.url+"/mcp", tokAgent)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if !strings.Contains(tl.Description, "a replay can only start from the token of a preview") ||
			!strings.Contains(tl.Description, "without changing it") {
			t.Errorf("%s's description lacks the safety contract: %q", tl.Name, tl.Description)
		}
	}
	slices.Sort(names)
	if want := []string{"dlq_cancel", "dlq_check", "dlq_pause", "dlq_preview", "dlq_replay", "dlq_resume", "dlq_status"}; !slices.Equal(names, want) {
		t.Fatalf("tools %q, want %q", names, want)
	}
	// dlq_replay takes a token, never a selection.
	for _, tl := range tools.Tools {
		if tl.Name == "dlq_replay" {
			data, _ := json.Marshal(tl.InputSchema)
			var schema struct {
				Properties map[string]any `json:"properties"`
				Required   []string       `json:"required"`
			}
			_ = json.Unmarshal(data, &schema)
			if _, sel := schema.Properties["selection"]; sel || !slices.Equal(schema.Required, []string{"token"}) {
				t.Errorf("dlq_replay's input schema %s", data)
			}
		}
	}

	var p engine.Preview
	if msg := callTool(t, s, "dlq_preview", map[string]any{"selection": dlq}, &p); msg != "" {
		t.Fatalf("dlq_preview: %s", msg)
	}
	if !strings.HasPrefix(p.Token, "p_") || p.Selected != 14 || p.Requester != "api:agent" {
		t.Fatalf("preview token %q selected %d requester %q", p.Token, p.Selected, p.Requester)
	}
	if n := e.rabbit.Count(dlq); n != 14 {
		t.Fatalf("dlq_preview changed the DLQ: %d", n)
	}
	if msg := callTool(t, s, "dlq_replay", map[string]any{"selection": dlq}, &struct{}{}); msg == "" {
		t.Fatal("dlq_replay accepted a selection")
	}
	var r engine.Replay
	if msg := callTool(t, s, "dlq_replay", map[string]any{"token": p.Token, "rate": "max"}, &r); msg != "" {
		t.Fatalf("dlq_replay: %s", msg)
	}
	if r.ID == "" || r.Approver != "api:agent" || r.Total != 14 {
		t.Fatalf("replay %+v", r)
	}
	testkit.Eventually(t, 60*time.Second, "dlq_status to say finished", func() bool {
		var cur engine.Replay
		return callTool(t, s, "dlq_status", map[string]any{"replay_id": r.ID}, &cur) == "" && cur.State == engine.StateFinished
	})
	// The status document carries the verdict beside the state.
	var doc map[string]any
	if msg := callTool(t, s, "dlq_status", map[string]any{"replay_id": r.ID}, &doc); msg != "" || doc["verdict"] != "clean" {
		t.Fatalf("dlq_status of a clean finish: %q verdict %v", msg, doc["verdict"])
	}
	var rep engine.CheckReport
	if msg := callTool(t, s, "dlq_check", map[string]any{"replay_id": r.ID}, &rep); msg != "" || rep.Replayed != 14 || rep.Returned != 0 {
		t.Fatalf("dlq_check: %q %+v", msg, rep)
	}
	if n := e.rabbit.Count(dlq); n != 0 {
		t.Fatalf("%d left in the DLQ", n)
	}
	if msg := callTool(t, s, "dlq_cancel", map[string]any{"replay_id": r.ID}, &struct{}{}); !strings.Contains(msg, "[not_controllable]") {
		t.Errorf("cancelling a finished replay: %q", msg)
	}
	// dlq_resume takes resend=in-doubt as the API does: a finished replay
	// is not controllable, an unknown resend is refused before anything.
	if msg := callTool(t, s, "dlq_resume", map[string]any{"replay_id": r.ID, "resend": "in-doubt"}, &struct{}{}); !strings.Contains(msg, "[not_controllable]") {
		t.Errorf("resuming a finished replay: %q", msg)
	}
	if msg := callTool(t, s, "dlq_resume", map[string]any{"replay_id": r.ID, "resend": "everything"}, &struct{}{}); msg == "" || !strings.Contains(msg, "Nothing was done") {
		t.Errorf("resume with an unknown resend: %q", msg)
	}
	// The session belongs to the agent: another principal's token cannot
	// use it.
	other := tokOther
	b.token.Store(&other)
	if _, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: "dlq_status", Arguments: map[string]any{}}); err == nil {
		t.Error("another principal's token used the agent's session")
	}
}

// TestMCPRequireHuman: with the human-approval setting dlq_replay posts
// the preview to Slack and waits; nothing moves until a person clicks
// Approve there.
func TestMCPRequireHuman(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, options{policy: apiPolicy(true)}, mcp.Config{RequireHuman: true})
	src, dlq := dlqWith(e.env, 6)
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })
	// The stdio front end's server, over in-memory transports: the caller
	// is fixed, as `dlqbot mcp` does with DLQBOT_MCP_TOKEN.
	ct, st := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		_ = mcp.Serve(ctx, e.api, mcp.Config{RequireHuman: true}, api.Caller{Identity: "api:agent", Principal: "agent", FrontEnd: "mcp"}, st, logger())
	}()
	s, err := sdk.NewClient(&sdk.Implementation{Name: "dlqbot-test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	var p engine.Preview
	if msg := callTool(t, s, "dlq_preview", map[string]any{"selection": dlq}, &p); msg != "" {
		t.Fatalf("dlq_preview: %s", msg)
	}
	var w struct {
		Status, Token, Channel, TS string
	}
	if msg := callTool(t, s, "dlq_replay", map[string]any{"token": p.Token}, &w); msg != "" {
		t.Fatalf("dlq_replay: %s", msg)
	}
	if w.Status != "waiting_for_approval" || w.Token != p.Token || w.Channel != channel {
		t.Fatalf("dlq_replay answered %+v", w)
	}
	pv, tok := e.waitPreview(1)
	if tok != p.Token || pv.TS != w.TS || !strings.Contains(pv.Content(), "api:agent") {
		t.Fatalf("posted preview %q with token %q", pv.Content(), tok)
	}
	// The same principal's bearer token through REST: refused, not a
	// way around the person (DLQBOT_MCP_REQUIRE_HUMAN makes it a
	// property of the caller, not of one tool).
	if out := e.mustCall(http.StatusForbidden, tokAgent, "POST", "/api/v1/previews/"+p.Token+"/approve", nil); out["code"] != "needs_human" {
		t.Fatalf("REST approval by a principal that needs a human: %v", out)
	}
	if rs := e.replays(); len(rs) != 0 || e.rabbit.Count(dlq) != 6 {
		t.Fatalf("something moved before a person approved: %d replays, DLQ %d", len(rs), e.rabbit.Count(dlq))
	}
	e.click("U0BOB00001", blocks.ActionApprove, tok, pv.TS)
	e.waitProgress(pv.TS, "Finished", 60*time.Second)
	r := e.replays()[0]
	if r.Requester != "api:agent" || r.Approver != "U0BOB00001" || r.Sent != 6 {
		t.Fatalf("replay %+v", r)
	}
}
