package bot_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/commands"
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
