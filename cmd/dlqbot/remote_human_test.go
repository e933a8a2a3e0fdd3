package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestMCPThroughServerAsksAPerson: `dlqbot mcp` as a client of the server
// with the token of a principal that needs a human: dlq_replay answers
// waiting_for_approval, the preview is
// posted in the API channel without the exception's text (a person's name
// and e-mail), nothing moves until a person clicks Approve, and that click
// runs the replay to the end: the DLQ empties into its source.
func TestMCPThroughServerAsksAPerson(t *testing.T) {
	t.Parallel()
	const (
		person = "Johanna Roe-Testperson"
		email  = "johanna.roe@example.com"
	)
	stub := slackstub.New(tableSecret)
	t.Cleanup(stub.Close)
	perm := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(perm, []byte(`principals:
  - name: agent
    token_sha256: `+commands.HashToken(tokAgent)+`
    needs_human: true
roles:
  - name: sre
    users: [U0OPERATOR]
    principals: [agent]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := merge(merge(tableEnv(t, stub), "DLQBOT_PERMISSIONS", perm), "DLQBOT_API_CHANNEL", "C0API")
	trail := &testkit.Trail{}
	base := tableServer(t, env, trail)

	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	var msgs []amqp.Publishing
	for i := range 4 {
		msgs = append(msgs, testkit.Msg("hm-"+strconv.Itoa(i), []byte(`{"n":`+strconv.Itoa(i)+`}`), amqp.Table{
			"x-original-exchange": "", "x-original-routingKey": src,
			"x-exception-message":    "KYC failed for customer " + person + ", email " + email,
			"x-exception-stacktrace": "java.lang.IllegalStateException: KYC failed for customer " + person,
		}))
	}
	r.Publish(dlq, msgs...)
	r.WaitCount(dlq, 4, 20*time.Second)
	r.Consume(src, func(amqp.Delivery) string { return "ack" })

	cmd := exec.Command(os.Args[0], "mcp")
	cmd.Env = []string{"DLQBOT_RUN_MAIN=1", "PATH=" + os.Getenv("PATH")}
	for k, v := range clientEnv(base, tokAgent) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := sdk.NewClient(&sdk.Implementation{Name: "cmd-test", Version: "v0"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "dlq_preview", Arguments: map[string]any{"selection": dlq}})
	if err != nil || res.IsError {
		t.Fatalf("dlq_preview: %v %s", err, toolText(res))
	}
	data, _ := json.Marshal(res.StructuredContent)
	var p struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(data, &p); err != nil || p.Token == "" {
		t.Fatalf("dlq_preview answered %s (%v)", data, err)
	}
	res, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "dlq_replay", Arguments: map[string]any{"token": p.Token}})
	if err != nil || res.IsError {
		t.Fatalf("dlq_replay: %v %s", err, toolText(res))
	}
	data, _ = json.Marshal(res.StructuredContent)
	var w struct{ Status, Token, Channel, TS string }
	if err := json.Unmarshal(data, &w); err != nil || w.Status != "waiting_for_approval" || w.Token != p.Token || w.Channel != "C0API" || w.TS == "" {
		t.Fatalf("dlq_replay answered %s (%v), want waiting_for_approval in C0API", data, err)
	}
	posted, ok := stub.Message("C0API", w.TS)
	if !ok {
		t.Fatalf("no message %s in C0API: %+v", w.TS, stub.Messages("C0API"))
	}
	for _, m := range stub.Messages("C0API") {
		if c := m.Content() + string(m.RawBlocks); strings.Contains(c, person) || strings.Contains(c, email) || strings.Contains(c, "KYC failed") {
			t.Fatalf("the channel post shows the exception's text: %s", c)
		}
	}
	if n := r.Count(dlq); n != 4 {
		t.Fatalf("the DLQ holds %d before a person approved, want 4", n)
	}
	resp, err := stub.Click(base, blocks.ActionApprove, blocks.ApproveValue(p.Token, ""), "U0OPERATOR", "C0API", posted.TS)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the person's Approve click: %v %v", err, resp)
	}
	resp.Body.Close()
	r.WaitCount(dlq, 0, 60*time.Second)
	testkit.Eventually(t, 60*time.Second, "the person's approval in the trail", func() bool {
		e, n := trail.Last("slack", audit.OpApprove)
		return n > 0 && e.Outcome == audit.OutcomeOK && e.Principal == "U0OPERATOR"
	})
	e, _ := trail.Last("mcp", audit.OpApprove)
	if e.Outcome != audit.OutcomeRefused || e.Code != "needs_human" || e.Principal != "agent" {
		t.Errorf("the agent's last approve entry: %+v, want refused needs_human (asked a person)", e)
	}
}
