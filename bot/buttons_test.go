package bot_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestGroupButtonsPostTheGroupsPreview clicks a group's and a check's
// preview buttons: each posts a preview of exactly that selection, for a
// user allowed to read the DLQ; a user without read, and a value that is not
// a selection, get an ephemeral refusal and the engine is not asked.
func TestGroupButtonsPostTheGroupsPreview(t *testing.T) {
	t.Parallel()
	policy, err := commands.ParsePolicy([]byte(`
roles:
  - name: sre
    users: [U_SRE]
    grants:
      - queues: ["orders.*"]
        actions: [read]
`))
	if err != nil {
		t.Fatal(err)
	}
	h := newPolicyHarness(t, nil, nil, policy)
	group := engine.GroupID("order <n> not found")
	clicks := []struct{ action, value, want string }{
		{blocks.ActionPreviewGroup, blocks.GroupSelection("orders.dlq reason=rejected", group), "orders.dlq reason=rejected group=" + group},
		{blocks.ActionPreviewReturned, blocks.ReturnedSelection("orders.dlq", "r_0123456789abcdef", ""), "orders.dlq replayed_by=r_0123456789abcdef"},
		{blocks.ActionPreviewGroup, blocks.ReturnedSelection("orders.dlq", "r_0123456789abcdef", group), "orders.dlq group=" + group + " replayed_by=r_0123456789abcdef"},
	}
	for i, c := range clicks {
		resp, err := h.stub.Click(h.srv.URL, c.action, c.value, "U_SRE", "C_OPS", "1732900000.000100")
		if got := status(t, resp, err); got != 200 {
			t.Fatalf("%s: status %d", c.action, got)
		}
		testkit.Eventually(t, 10*time.Second, "the group's preview posted", func() bool { return len(h.stub.Messages("C_OPS")) == i+1 })
		if got := h.stub.Messages("C_OPS")[i].Text; !strings.Contains(got, "Preview of orders.dlq") {
			t.Fatalf("%s: posted %q", c.action, got)
		}
		// The fake engine echoes the selection it was given into the preview.
		raw, _ := json.Marshal(h.stub.Messages("C_OPS")[i].Blocks)
		if !strings.Contains(string(raw), c.want) {
			t.Fatalf("%s: preview of another selection, want %q in\n%s", c.action, c.want, raw)
		}
	}
	calls := h.eng.calls.Load()

	// No read on payments.dlq: refused, nothing previewed.
	resp, err := h.stub.Click(h.srv.URL, blocks.ActionPreviewGroup, blocks.GroupSelection("payments.dlq", group), "U_SRE", "C_OPS", "1732900000.000100")
	if got := status(t, resp, err); got != 200 {
		t.Fatalf("status %d", got)
	}
	testkit.Eventually(t, 10*time.Second, "a refusal", func() bool { return len(h.stub.Ephemerals("U_SRE")) == 1 })
	// Someone with no grant at all.
	resp, err = h.stub.Click(h.srv.URL, blocks.ActionPreviewReturned, blocks.ReturnedSelection("orders.dlq", "r_0123456789abcdef", ""), "U_NOBODY", "C_OPS", "1732900000.000100")
	if got := status(t, resp, err); got != 200 {
		t.Fatalf("status %d", got)
	}
	testkit.Eventually(t, 10*time.Second, "a refusal", func() bool { return len(h.stub.Ephemerals("U_NOBODY")) == 1 })
	// A value that is not a selection.
	resp, err = h.stub.Click(h.srv.URL, blocks.ActionPreviewGroup, "orders.dlq bogus=1", "U_SRE", "C_OPS", "1732900000.000100")
	if got := status(t, resp, err); got != 200 {
		t.Fatalf("status %d", got)
	}
	testkit.Eventually(t, 10*time.Second, "a refusal", func() bool { return len(h.stub.Ephemerals("U_SRE")) == 2 })
	if e := h.stub.Ephemerals("U_SRE")[1]; !strings.Contains(e.Text, "does not name a selection") {
		t.Fatalf("refusal %q", e.Text)
	}
	if n := h.eng.calls.Load(); n != calls || len(h.stub.Messages("C_OPS")) != len(clicks) {
		t.Fatalf("refused clicks reached the engine (%d calls, want %d) or posted", n, calls)
	}
}
