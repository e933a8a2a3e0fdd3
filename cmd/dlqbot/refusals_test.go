package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
)

// Tokens of the refusal table's principals.
const (
	tokViewer   = "refusal-viewer-0123456789"
	tokOperator = "refusal-operator-0123456789"
	tokStranger = "refusal-stranger-0123456789"
	tableSecret = "refusal-table-signing-secret"
)

// tablePolicy is the refusal table's one policy: viewer may read,
// operator may read, replay and publish, stranger is a principal in no
// role. Each principal is a Slack user (as_user) and has a bearer token;
// osUser, when set, is named under the principal of that name (the
// terminal acts as it), so the same roles serve every row.
func tablePolicy(osUser, as string) string {
	os := func(name string) string {
		if name == as && osUser != "" {
			return "\n    os_users: [" + osUser + "]"
		}
		return ""
	}
	return `principals:
  - name: viewer
    token_sha256: ` + commands.HashToken(tokViewer) + `
    as_user: U0VIEWER01` + os("viewer") + `
  - name: operator
    token_sha256: ` + commands.HashToken(tokOperator) + `
    as_user: U0OPERATOR` + os("operator") + `
  - name: stranger
    token_sha256: ` + commands.HashToken(tokStranger) + `
roles:
  - name: viewers
    users: [U0VIEWER01]
    grants:
      - queues: ["*"]
        actions: [read]
  - name: operators
    users: [U0OPERATOR]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
`
}

// tableServer runs the serve wiring (newReplica: Slack, the HTTP API and
// MCP on one mux, a worker) against the Slack stand-in, recording the
// operations in trail. It returns its base URL.
func tableServer(t *testing.T, env map[string]string, trail *testkit.Trail) string {
	t.Helper()
	return tableServerLog(t, env, trail, io.Discard)
}

// tableServerLog is tableServer writing its log to logw.
func tableServerLog(t *testing.T, env map[string]string, trail *testkit.Trail, logw io.Writer) string {
	t.Helper()
	cfg, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	a, err := openApp(cfg, logw)
	if err != nil {
		t.Fatal(err)
	}
	a.audit = trail
	r, err := a.newReplica()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.run(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done; a.Close() })
	return "http://" + ln.Addr().String()
}

// tableEnv is a test's environment with Slack on the stand-in stub.
func tableEnv(t *testing.T, stub *slackstub.Stub) map[string]string {
	return merge(merge(merge(testEnv(t), "SLACK_BOT_TOKEN", "xoxb-table"), "SLACK_SIGNING_SECRET", tableSecret), "SLACK_API_URL", stub.APIURL())
}

// tableDLQ makes a DLQ holding n dead letters whose source queue has a
// consumer that acks, and returns it with the broker connection.
func tableDLQ(t *testing.T, n int) (*testkit.Rabbit, string) {
	t.Helper()
	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(n, 100)...)
	r.WaitCount(dlq, n, 20*time.Second)
	r.Consume(src, func(amqp.Delivery) string { return "ack" })
	return r, dlq
}

// apiCall makes an HTTP API call and returns its status and JSON body.
func apiCall(t *testing.T, base, tok, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

type bearerRT struct{ tok string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects an MCP client over streamable HTTP as tok; the
// caller closes it.
func mcpSession(t *testing.T, base, tok string) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := sdk.NewClient(&sdk.Implementation{Name: "table", Version: "v0"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1, DisableStandaloneSSE: true,
			HTTPClient: &http.Client{Transport: bearerRT{tok}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mcpTool calls an MCP tool over streamable HTTP as tok and returns "ok"
// or the refusal's code ("[code] sentence").
func mcpTool(t *testing.T, base, tok, name string, args map[string]any) string {
	t.Helper()
	s := mcpSession(t, base, tok)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !res.IsError {
		return "ok"
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text += tc.Text
		}
	}
	if code, _, ok := strings.Cut(strings.TrimPrefix(text, "["), "]"); ok && strings.HasPrefix(text, "[") {
		return code
	}
	return "error: " + text
}

// TestRefusalTableAcrossFrontEnds runs one table of operations × callers
// through all four front ends — the terminal (in-process, as the OS user
// the policy names for the row), Slack (signed requests through the
// stand-in), the HTTP API and MCP (bearer tokens) — against one policy's
// roles, and checks that every cell gets the same decision: "ok" or the
// same refusal code, read from each front end's own answer (exit status
// and JSON code, HTTP code, MCP's [code], Slack's recorded operation) and
// from the audit trail. Afterwards the broker shows nothing moved: the
// refused approvals left the unused preview's messages in the DLQ.
func TestRefusalTableAcrossFrontEnds(t *testing.T) {
	t.Parallel()
	me := currentUser()
	if me == "" {
		t.Skip("no OS user name to map in the policy")
	}
	stub := slackstub.New(tableSecret)
	t.Cleanup(stub.Close)
	dir := t.TempDir()
	policyFile := func(as string) string {
		p := filepath.Join(dir, "policy-"+as+".yaml")
		if err := os.WriteFile(p, []byte(tablePolicy(me, as)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := merge(tableEnv(t, stub), "DLQBOT_PERMISSIONS", policyFile("none"))
	trail := &testkit.Trail{}
	base := tableServer(t, env, trail)

	// A finished replay X (its token T spent) and an unused preview U.
	r, dlq := tableDLQ(t, 6)
	status, out := apiCall(t, base, tokOperator, "POST", "/api/v1/previews", map[string]string{"selection": dlq + " limit=3"})
	if status != http.StatusCreated {
		t.Fatalf("preview: %d %v", status, out)
	}
	spent := out["token"].(string)
	status, out = apiCall(t, base, tokOperator, "POST", "/api/v1/previews/"+spent+"/approve", map[string]any{"rate": "max"})
	if status != http.StatusCreated {
		t.Fatalf("approve: %d %v", status, out)
	}
	replay := out["replay_id"].(string)
	testkit.Eventually(t, 60*time.Second, "the setup replay to finish", func() bool {
		_, out := apiCall(t, base, tokOperator, "GET", "/api/v1/replays/"+replay, nil)
		return out["state"] == "finished"
	})
	r.WaitCount(dlq, 3, 20*time.Second)
	status, out = apiCall(t, base, tokOperator, "POST", "/api/v1/previews", map[string]string{"selection": dlq})
	if status != http.StatusCreated {
		t.Fatalf("preview: %d %v", status, out)
	}
	unused := out["token"].(string)

	type op struct {
		name, auditOp string
		terminal      []string
		slack         string
		api           [2]string // method, path
		body          any
		tool          string
		args          map[string]any
	}
	opsTable := []op{
		{"preview", audit.OpPreview, []string{"preview", dlq}, "preview " + dlq, [2]string{"POST", "/api/v1/previews"},
			map[string]string{"selection": dlq}, "dlq_preview", map[string]any{"selection": dlq}},
		{"approve unused", audit.OpApprove, []string{"replay", unused}, "replay " + unused, [2]string{"POST", "/api/v1/previews/" + unused + "/approve"},
			nil, "dlq_replay", map[string]any{"token": unused}},
		{"approve spent", audit.OpApprove, []string{"replay", spent}, "replay " + spent, [2]string{"POST", "/api/v1/previews/" + spent + "/approve"},
			nil, "dlq_replay", map[string]any{"token": spent}},
		{"pause", audit.OpPause, []string{"pause", replay}, "pause " + replay, [2]string{"POST", "/api/v1/replays/" + replay + "/pause"},
			nil, "dlq_pause", map[string]any{"replay_id": replay}},
		{"cancel", audit.OpCancel, []string{"cancel", replay}, "cancel " + replay, [2]string{"POST", "/api/v1/replays/" + replay + "/cancel"},
			nil, "dlq_cancel", map[string]any{"replay_id": replay}},
	}
	rows := []struct {
		name, slackUser, token, terminalAs string
		want                               []string // per op
	}{
		// A spent token is refused as such before any grant is looked
		// at: no one could get past it.
		{"viewer", "U0VIEWER01", tokViewer, "viewer", []string{"ok", "forbidden", "token_used", "not_controllable", "forbidden"}},
		{"operator", "U0OPERATOR", tokOperator, "operator", []string{"ok", "", "token_used", "not_controllable", "not_controllable"}},
		{"stranger", "U0STRANGER", tokStranger, "none", []string{"forbidden", "forbidden", "token_used", "forbidden", "forbidden"}},
	}
	apiCodes := map[string]string{"token_not_found": "token_expired", "bad_request": "bad_params"}
	for _, row := range rows {
		termEnv := merge(env, "DLQBOT_PERMISSIONS", policyFile(row.terminalAs))
		for i, o := range opsTable {
			want := row.want[i]
			if want == "" {
				continue // would start a replay: the four-eyes tests cover approvals that succeed
			}
			cell := fmt.Sprintf("%s × %s", row.name, o.name)
			got := map[string]string{}
			// The terminal.
			tout, _, code := dlqbot(t, termEnv, append(o.terminal, "--json")...)
			if code == 0 {
				got["terminal"] = "ok"
			} else {
				c, _ := oneJSON(t, tout)["code"].(string)
				got["terminal"] = c
			}
			// The HTTP API.
			status, body := apiCall(t, base, row.token, o.api[0], o.api[1], o.body)
			if status < 300 {
				got["api"] = "ok"
			} else {
				c, _ := body["code"].(string)
				if m, ok := apiCodes[c]; ok {
					c = m
				}
				got["api"] = c
			}
			// MCP.
			got["mcp"] = mcpTool(t, base, row.token, o.tool, o.args)
			// Slack: a signed slash command; its decision is the
			// operation the bot recorded, and the user hears of a refusal.
			_, before := trail.Last("slack", o.auditOp)
			ephemerals := len(stub.Ephemerals(row.slackUser))
			resp, err := stub.SlashCommand(base, "/dlq", o.slack, row.slackUser, "C0TABLE")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s: slack: %v %v", cell, err, resp)
			}
			resp.Body.Close()
			testkit.Eventually(t, 30*time.Second, cell+": the Slack command recorded", func() bool {
				_, n := trail.Last("slack", o.auditOp)
				return n > before
			})
			e, _ := trail.Last("slack", o.auditOp)
			got["slack"] = testkit.Decision(e)
			if got["slack"] != "ok" {
				testkit.Eventually(t, 10*time.Second, cell+": a Slack refusal", func() bool { return len(stub.Ephemerals(row.slackUser)) > ephemerals })
			}
			for fe, d := range got {
				if d != want {
					t.Errorf("%s through %s: %q, want %q (all: %v)", cell, fe, d, want, got)
				}
			}
			for _, fe := range []string{"api", "mcp"} {
				if e, n := trail.Last(fe, o.auditOp); n == 0 || testkit.Decision(e) != want {
					t.Errorf("%s through %s: the trail says %+v", cell, fe, e)
				}
			}
		}
	}
	// Nothing the table refused moved a message: the unused preview's
	// three messages are still in the DLQ and X is still finished.
	if n := r.Count(dlq); n != 3 {
		t.Fatalf("the DLQ holds %d messages, want the unused preview's 3", n)
	}
	if _, out := apiCall(t, base, tokOperator, "GET", "/api/v1/replays/"+replay, nil); out["state"] != "finished" {
		t.Fatalf("replay %s is %v after the table", replay, out["state"])
	}
}

const (
	tokAlice = "four-eyes-alice-0123456789"
	tokAgent = "four-eyes-agent-0123456789"
)

// slackDecision sends a signed slash command as user and returns the
// decision the bot recorded for op.
func slackDecision(t *testing.T, stub *slackstub.Stub, base string, trail *testkit.Trail, user, text, op string) string {
	t.Helper()
	_, before := trail.Last("slack", op)
	resp, err := stub.SlashCommand(base, "/dlq", text, user, "C0TABLE")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("slack %s: %v %v", text, err, resp)
	}
	resp.Body.Close()
	testkit.Eventually(t, 60*time.Second, "the Slack command recorded", func() bool {
		_, n := trail.Last("slack", op)
		return n > before
	})
	e, _ := trail.Last("slack", op)
	return testkit.Decision(e)
}

// TestFourEyesAcrossFrontEndsAndSplitTokens: with require_distinct_approver
// 5 the four-eyes rule compares principals, not identity strings: a
// preview made at the terminal by the OS user the policy names under
// alice (as_user U0ALICE001) cannot be approved by alice in Slack or with
// her token; the threshold counts alice's self-approvals per DLQ over the
// window, so two previews of 3 cannot be self-approved one after the
// other (the second is refused, bob approves it); and a principal with
// needs_human is refused approving through REST while MCP asks a person
// instead. The broker shows what moved: exactly the two approved
// previews' messages.
func TestFourEyesAcrossFrontEndsAndSplitTokens(t *testing.T) {
	t.Parallel()
	me := currentUser()
	if me == "" {
		t.Skip("no OS user name to map in the policy")
	}
	stub := slackstub.New(tableSecret)
	t.Cleanup(stub.Close)
	perm := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(perm, []byte(`principals:
  - name: alice
    token_sha256: `+commands.HashToken(tokAlice)+`
    as_user: U0ALICE001
    os_users: [`+me+`]
  - name: agent
    token_sha256: `+commands.HashToken(tokAgent)+`
    needs_human: true
roles:
  - name: sre
    users: [U0ALICE001, U0BOB00001]
    principals: [agent]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
approval:
  require_distinct_approver: 5
  window: 1h
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := merge(merge(tableEnv(t, stub), "DLQBOT_PERMISSIONS", perm), "DLQBOT_API_CHANNEL", "C0API")
	trail := &testkit.Trail{}
	base := tableServer(t, env, trail)
	r, dlq := tableDLQ(t, 10)
	preview := func(sel string) map[string]any {
		out, _, code := dlqbot(t, env, "preview", dlq, sel, "--json")
		if code != 0 {
			t.Fatalf("terminal preview: %s", out)
		}
		return oneJSON(t, out)
	}

	// Across front ends: the terminal's preview of 6 is alice's.
	big := preview("limit=6")
	if big["requester"] != "U0ALICE001" {
		t.Fatalf("the terminal previewed as %v, want alice's U0ALICE001", big["requester"])
	}
	bigTok := big["token"].(string)
	if d := slackDecision(t, stub, base, trail, "U0ALICE001", "replay "+bigTok, audit.OpApprove); d != "needs_second_person" {
		t.Fatalf("alice approving her terminal preview in Slack: %s", d)
	}
	if status, out := apiCall(t, base, tokAlice, "POST", "/api/v1/previews/"+bigTok+"/approve", nil); status != 403 || out["code"] != "needs_second_person" {
		t.Fatalf("alice approving her terminal preview with her token: %d %v", status, out)
	}
	// Needs a human: the agent is refused through REST; MCP asks a person.
	if status, out := apiCall(t, base, tokAgent, "POST", "/api/v1/previews/"+bigTok+"/approve", nil); status != 403 || out["code"] != "needs_human" {
		t.Fatalf("the agent approving through REST: %d %v", status, out)
	}
	if d := mcpTool(t, base, tokAgent, "dlq_replay", map[string]any{"token": bigTok}); d != "ok" {
		t.Fatalf("the agent's dlq_replay: %s, want it to ask a person", d)
	}
	testkit.Eventually(t, 20*time.Second, "the preview posted for a person", func() bool { return len(stub.Messages("C0API")) >= 1 })
	if n := r.Count(dlq); n != 10 {
		t.Fatalf("refused approvals moved messages: the DLQ holds %d of 10", n)
	}

	// Split tokens: 3 self-approved, then 3 more would be 6 > 5.
	first := preview("limit=3")["token"].(string)
	if d := slackDecision(t, stub, base, trail, "U0ALICE001", "replay "+first+" rate=max", audit.OpApprove); d != "ok" {
		t.Fatalf("alice self-approving 3 of the threshold's 5: %s", d)
	}
	r.WaitCount(dlq, 7, 60*time.Second)
	second := preview("limit=3")["token"].(string)
	if status, out := apiCall(t, base, tokAlice, "POST", "/api/v1/previews/"+second+"/approve", nil); status != 403 || out["code"] != "needs_second_person" ||
		!strings.Contains(out["error"].(string), "approved 3 message(s) of your own") {
		t.Fatalf("alice self-approving 3 more: %d %v", status, out)
	}
	if d := slackDecision(t, stub, base, trail, "U0ALICE001", "replay "+second, audit.OpApprove); d != "needs_second_person" {
		t.Fatalf("alice self-approving 3 more in Slack: %s", d)
	}
	if n := r.Count(dlq); n != 7 {
		t.Fatalf("the DLQ holds %d, want 7 after the refusals", n)
	}
	if d := slackDecision(t, stub, base, trail, "U0BOB00001", "replay "+second+" rate=max", audit.OpApprove); d != "ok" {
		t.Fatalf("bob approving alice's second preview: %s", d)
	}
	r.WaitCount(dlq, 4, 60*time.Second)

	// The token is spent now: whoever approves it again is told so —
	// alice too, whom the four-eyes rule would also stop, since no second
	// person could get past a spent token either.
	if status, out := apiCall(t, base, tokAlice, "POST", "/api/v1/previews/"+second+"/approve", nil); status != 409 || out["code"] != "token_used" {
		t.Errorf("alice approving her spent token through REST: %d %v", status, out)
	}
	if d := mcpTool(t, base, tokAlice, "dlq_replay", map[string]any{"token": second}); d != "token_used" {
		t.Errorf("alice approving her spent token through MCP: %s", d)
	}
	if d := slackDecision(t, stub, base, trail, "U0ALICE001", "replay "+second, audit.OpApprove); d != "token_used" {
		t.Errorf("alice approving her spent token in Slack: %s", d)
	}
	if d := slackDecision(t, stub, base, trail, "U0BOB00001", "replay "+second, audit.OpApprove); d != "token_used" {
		t.Errorf("bob approving the spent token again in Slack: %s", d)
	}
	if n := r.Count(dlq); n != 4 {
		t.Fatalf("the DLQ holds %d after the spent token's refusals, want 4", n)
	}
}
