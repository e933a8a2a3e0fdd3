package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestPreviewOnlyInAllowedChannels: a DLQ with a channel rule is previewed
// in its channel; asked for elsewhere, the preview is refused ephemerally
// naming the allowed channel, and the DLQ is not read.
func TestPreviewOnlyInAllowedChannels(t *testing.T) {
	t.Parallel()
	policy, err := commands.ParsePolicy([]byte(`
roles:
  - name: sre
    users: [U_REQ]
    grants:
      - queues: ["*"]
        actions: [read]
channels:
  - queues: ["payments.*"]
    allow: [C_PAY]
`))
	if err != nil {
		t.Fatal(err)
	}
	h := newPolicyHarness(t, nil, nil, policy)
	if _, err := h.stub.SlashCommand(h.srv.URL, "/dlq", "preview payments.dlq", "U_REQ", "C_OPS"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "a refusal", func() bool { return len(h.stub.Ephemerals("U_REQ")) == 1 })
	if got := h.stub.Ephemerals("U_REQ")[0].Text; !strings.Contains(got, "`C_PAY`") || !strings.Contains(got, "nothing was read") {
		t.Fatalf("refusal %q", got)
	}
	if n := h.eng.calls.Load(); n != 0 || len(h.stub.Messages("C_OPS")) != 0 {
		t.Fatalf("engine called %d times, %d posts in C_OPS", n, len(h.stub.Messages("C_OPS")))
	}
	for ch, dlq := range map[string]string{"C_PAY": "payments.dlq", "C_OPS": "orders.dlq"} {
		if _, err := h.stub.SlashCommand(h.srv.URL, "/dlq", "preview "+dlq, "U_REQ", ch); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, "the preview of "+dlq+" in "+ch, func() bool { return len(h.stub.Messages(ch)) == 1 })
	}
}

// TestReplayShownOnlyInAllowedChannels: `replay <token>` typed in a
// channel the policy does not allow for the DLQ posts nothing there: the
// progress goes to the activity channel when the policy allows that, and
// the approver is told where, privately; when neither is allowed, no
// channel shows the replay.
func TestReplayShownOnlyInAllowedChannels(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, allow, want string
	}{
		{"activity allowed", "[C_OPS, C_ACTIVITY]", "C_ACTIVITY"},
		{"activity not allowed", "[C_OPS]", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			policy, err := commands.ParsePolicy([]byte(`
roles:
  - name: sre
    users: [U_REQ, U_APP]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
channels:
  - queues: ["orders.*"]
    allow: ` + c.allow + `
`))
			if err != nil {
				t.Fatal(err)
			}
			h := newPolicyHarness(t, nil, nil, policy)
			if _, err := h.stub.SlashCommand(h.srv.URL, "/dlq", "replay p_fake", "U_APP", "C_ELSEWHERE"); err != nil {
				t.Fatal(err)
			}
			testkit.Eventually(t, 10*time.Second, "the approver told where", func() bool {
				for _, e := range h.stub.Ephemerals("U_APP") {
					if strings.Contains(e.Text, "r_fake") {
						return true
					}
				}
				return false
			})
			var told string
			for _, e := range h.stub.Ephemerals("U_APP") {
				told += e.Text + "\n"
			}
			if c.want != "" && !strings.Contains(told, "<#"+c.want+">") {
				t.Fatalf("the approver is not given a link to %s: %q", c.want, told)
			}
			if n := len(h.stub.Messages("C_ELSEWHERE")); n != 0 {
				t.Fatalf("%d posts in the channel the policy does not allow", n)
			}
			if c.want != "" {
				testkit.Eventually(t, 10*time.Second, "the progress in "+c.want, func() bool { return len(h.stub.Messages(c.want)) == 1 })
				if ref := h.store.Refs("r_fake"); ref[0] != c.want {
					t.Fatalf("the replay is recorded as shown in %q", ref[0])
				}
			} else if ref := h.store.Refs("r_fake"); ref[0] != "" || len(h.stub.Messages("C_ACTIVITY")) != 0 {
				t.Fatalf("shown in %q; %d posts in the activity channel", ref[0], len(h.stub.Messages("C_ACTIVITY")))
			}
		})
	}
}

// TestAPIApprovalShownOnlyInAllowedChannels: a replay approved through
// the API, of a DLQ the policy does not allow in the API channel, is
// threaded in the activity channel, which it allows, never in the API
// channel.
func TestAPIApprovalShownOnlyInAllowedChannels(t *testing.T) {
	t.Parallel()
	policy, err := commands.ParsePolicy([]byte(`
roles:
  - name: sre
    users: [U_REQ]
    grants:
      - queues: ["*"]
        actions: [read]
channels:
  - queues: ["orders.*"]
    allow: [C_OPS, C_ACTIVITY]
`))
	if err != nil {
		t.Fatal(err)
	}
	h := newPolicyHarness(t, nil, func(c *bot.Config) { c.APIChannel = "C_API" }, policy)
	r := engine.Replay{ID: "r_api", Token: "p_api", DLQ: "orders.dlq", Approver: "api:runbook", Requester: "api:runbook", Total: 3}
	if err := h.bot.ShowReplay(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if n := len(h.stub.Messages("C_API")); n != 0 {
		t.Fatalf("%d posts in the API channel the policy does not allow for orders.dlq", n)
	}
	if ms := h.stub.Messages("C_ACTIVITY"); len(ms) != 1 || h.store.Refs("r_api")[0] != "C_ACTIVITY" {
		t.Fatalf("%d posts in the activity channel; shown in %q", len(ms), h.store.Refs("r_api")[0])
	}
}
