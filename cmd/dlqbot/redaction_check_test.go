package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
)

// mcpText calls an MCP tool over streamable HTTP as tok and returns its
// text content and whether it is an error.
func mcpText(t *testing.T, base, tok, name string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := sdk.NewClient(&sdk.Implementation{Name: "redaction", Version: "v0"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1, DisableStandaloneSSE: true,
			HTTPClient: &http.Client{Transport: bearerRT{tok}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text += tc.Text
		}
	}
	if res.StructuredContent != nil {
		data, _ := json.Marshal(res.StructuredContent)
		text += string(data)
	}
	return text, res.IsError
}

// redactionPolicy names operator (a Slack user, a bearer token, and the
// OS user osUser when as is "operator") with every grant and stranger
// (a bearer token, and osUser when as is "stranger") with none, and
// hides the x-card-holder header and $.card.number.
func redactionPolicy(osUser, as string) string {
	os := func(name string) string {
		if name == as {
			return "\n    os_users: [" + osUser + "]"
		}
		return ""
	}
	return `principals:
  - name: operator
    token_sha256: ` + commands.HashToken(tokOperator) + `
    as_user: U0OPERATOR` + os("operator") + `
  - name: stranger
    token_sha256: ` + commands.HashToken(tokStranger) + os("stranger") + `
roles:
  - name: operators
    users: [U0OPERATOR]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
redaction:
  headers: [x-card-holder]
  json_paths: [$.card.number]
`
}

// TestRedactionHoldsInCheckAndFailureDetails: a replay's copies come back
// to the DLQ with an exception text that quotes a hidden header's value
// and a hidden JSON path's value. The check report (its groups and
// examples) and the status's failure details show neither value — and
// do show [redacted] where they were — through all five outlets: the
// HTTP API, MCP, the terminal (JSON), Slack (the ephemeral check and
// status answers) and the logs of the server and the terminal. A
// principal without `read` gets no check and no status, and so none of
// the text, through any front end. The broker confirms the returns.
func TestRedactionHoldsInCheckAndFailureDetails(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"classic", "quorum"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var args amqp.Table
			if kind == "quorum" {
				args = testkit.Quorum(nil)
			}
			redactionHolds(t, args)
		})
	}
}

// redactionHolds is TestRedactionHoldsInCheckAndFailureDetails with a DLQ
// of arguments dlqArgs.
func redactionHolds(t *testing.T, dlqArgs amqp.Table) {
	me := currentUser()
	if me == "" {
		t.Skip("no OS user name to map in the policy")
	}
	const card, holder = "4111111111111111", "Jane Q Holder"
	stub := slackstub.New(tableSecret)
	t.Cleanup(stub.Close)
	dir := t.TempDir()
	policyFile := func(as string) string {
		p := filepath.Join(dir, "policy-"+as+".yaml")
		if err := os.WriteFile(p, []byte(redactionPolicy(me, as)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := merge(tableEnv(t, stub), "DLQBOT_PERMISSIONS", policyFile("operator"))
	trail := &testkit.Trail{}
	logs := &lockedBuffer{}
	base := tableServerLog(t, env, trail, logs)

	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, dlqArgs)
	msg := func(id string) amqp.Publishing {
		return testkit.Msg(id, []byte(`{"card":{"number":"`+card+`","exp":"12/30"}}`), amqp.Table{
			"x-original-exchange": "", "x-original-routingKey": src, "x-card-holder": holder, "x-exception-message": "card " + card + " of " + holder + " declined"})
	}
	r.Reject(src, msg("c-1"), msg("c-2"))
	r.WaitCount(dlq, 2, 20*time.Second)
	r.Consume(src, func(amqp.Delivery) string { return "reject" }) // every copy comes back

	status, out := apiCall(t, base, tokOperator, "POST", "/api/v1/previews", map[string]string{"selection": dlq})
	if status != http.StatusCreated {
		t.Fatalf("preview: %d %v", status, out)
	}
	tok, _ := out["token"].(string)
	if tok == "" {
		t.Fatalf("preview without a token: %v", out)
	}
	status, out = apiCall(t, base, tokOperator, "POST", "/api/v1/previews/"+tok+"/approve", map[string]any{"rate": "max"})
	if status != http.StatusCreated {
		t.Fatalf("approve: %d %v", status, out)
	}
	id := out["replay_id"].(string)
	testkit.Eventually(t, 90*time.Second, "the replay to end with its copies back", func() bool {
		_, out := apiCall(t, base, tokOperator, "GET", "/api/v1/replays/"+id, nil)
		n, _ := out["returned"].(float64)
		return (out["state"] == "finished" || out["state"] == "stopped") && n == 2
	})
	// The broker's word: the copies are back in the DLQ.
	r.WaitCount(dlq, 2, 20*time.Second)

	emitted := map[string]string{}
	// The HTTP API.
	_, chk := apiCall(t, base, tokOperator, "POST", "/api/v1/replays/"+id+"/check", nil)
	_, st := apiCall(t, base, tokOperator, "GET", "/api/v1/replays/"+id, nil)
	chkJSON, _ := json.Marshal(chk)
	stJSON, _ := json.Marshal(st)
	emitted["api check"], emitted["api status"] = string(chkJSON), string(stJSON)
	if n, _ := chk["returned"].(float64); n != 2 {
		t.Fatalf("the API's check counts %v returned, want 2: %s", chk["returned"], chkJSON)
	}
	// MCP.
	emitted["mcp check"], _ = mcpText(t, base, tokOperator, "dlq_check", map[string]any{"replay_id": id})
	emitted["mcp status"], _ = mcpText(t, base, tokOperator, "dlq_status", map[string]any{"replay_id": id})
	// The terminal.
	tout, terr, code := dlqbot(t, env, "check", id, "--json")
	if code != 0 {
		t.Fatalf("terminal check: exit %d\n%s\n%s", code, tout, terr)
	}
	emitted["terminal check"] = tout
	sout, serr, _ := dlqbot(t, env, "status", id, "--json")
	emitted["terminal status"] = sout
	emitted["terminal log"] = terr + serr
	// Slack: the check and status answers (ephemeral, to a reader).
	for _, cmd := range []string{"check", "status"} {
		n := len(stub.Ephemerals("U0OPERATOR"))
		resp, err := stub.SlashCommand(base, "/dlq", cmd+" "+id, "U0OPERATOR", "C0TABLE")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("slack %s: %v %v", cmd, err, resp)
		}
		resp.Body.Close()
		testkit.Eventually(t, 30*time.Second, "Slack's "+cmd+" answer", func() bool { return len(stub.Ephemerals("U0OPERATOR")) > n })
		var all []string
		for _, e := range stub.Ephemerals("U0OPERATOR")[n:] {
			all = append(all, e.Text, string(e.RawBlocks))
		}
		emitted["slack "+cmd] = strings.Join(all, "\n")
	}
	for _, m := range stub.Messages("") {
		emitted["slack posts"] += m.Content() + "\n"
	}
	emitted["server log"] = logs.String()

	for where, s := range emitted {
		for _, leak := range []string{card, holder} {
			if strings.Contains(s, leak) {
				t.Errorf("%s shows %q:\n%s", where, leak, s)
			}
		}
	}
	// Where the exception shows, the hidden values are marked.
	for _, where := range []string{"api check", "api status", "mcp check", "mcp status", "terminal check", "terminal status", "slack check"} {
		if !strings.Contains(emitted[where], "[redacted]") || !strings.Contains(emitted[where], "declined") {
			t.Errorf("%s does not show the redacted exception text:\n%s", where, emitted[where])
		}
	}

	// Without `read`: no check, no status, none of the text.
	strangerEnv := merge(env, "DLQBOT_PERMISSIONS", policyFile("stranger"))
	for _, args := range [][]string{{"check", id, "--json"}, {"status", id, "--json"}} {
		out, errw, code := dlqbot(t, strangerEnv, args...)
		if code == 0 || strings.Contains(out+errw, "declined") {
			t.Errorf("terminal %v as stranger: exit %d\n%s\n%s", args, code, out, errw)
		}
	}
	for _, c := range []struct{ method, path string }{{"POST", "/check"}, {"GET", ""}} {
		status, out := apiCall(t, base, tokStranger, c.method, "/api/v1/replays/"+id+c.path, nil)
		data, _ := json.Marshal(out)
		if status != http.StatusForbidden || strings.Contains(string(data), "declined") {
			t.Errorf("api %s %s as stranger: %d %s", c.method, c.path, status, data)
		}
	}
	for _, tool := range []string{"dlq_check", "dlq_status"} {
		if text, isErr := mcpText(t, base, tokStranger, tool, map[string]any{"replay_id": id}); !isErr || strings.Contains(text, "declined") {
			t.Errorf("mcp %s as stranger: %v %s", tool, isErr, text)
		}
	}
	for _, cmd := range []string{"check", "status"} {
		n := len(stub.Ephemerals("U0STRANGER"))
		resp, err := stub.SlashCommand(base, "/dlq", cmd+" "+id, "U0STRANGER", "C0TABLE")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("slack %s: %v %v", cmd, err, resp)
		}
		resp.Body.Close()
		testkit.Eventually(t, 30*time.Second, "Slack's answer to the stranger", func() bool { return len(stub.Ephemerals("U0STRANGER")) > n })
		for _, e := range stub.Ephemerals("U0STRANGER")[n:] {
			if strings.Contains(e.Text+string(e.RawBlocks), "declined") {
				t.Errorf("slack %s as stranger: %s", cmd, e.Text)
			}
		}
	}
}
