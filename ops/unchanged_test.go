package ops_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// TestWhenUnchanged: approval.when_unchanged decides, for every front
// end, who may approve a preview whose target's consumers were all
// connected before its messages failed. warn (the default) lets the
// requester approve it; second_person refuses the requester
// (needs_second_person, the terminal's alice being Slack's alice) and lets
// someone else; refuse refuses everyone (forbidden, naming the policy).
// A preview whose consumers were restarted is not held back by either.
func TestWhenUnchanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// No four-eyes rule: what refuses is when_unchanged alone.
	base := strings.Replace(policy, "approval:\n  require_distinct_approver: 100\n", "", 1)
	withRule := func(w commands.WhenUnchanged) string {
		if w == "" {
			return base
		}
		return base + "approval:\n  when_unchanged: " + string(w) + "\n"
	}
	alice, other := ops.SlackCaller("U0ALICE001"), ops.SlackCaller("U0OTHER001")
	for _, tc := range []struct {
		rule  commands.WhenUnchanged
		since engine.Since
		by    ops.Caller
		want  ops.Code
	}{
		{"", engine.SinceUnchanged, alice, "ok"},
		{commands.WhenUnchangedWarn, engine.SinceUnchanged, alice, "ok"},
		{commands.WhenUnchangedSecondPerson, engine.SinceUnchanged, alice, ops.NeedsSecondPerson},
		{commands.WhenUnchangedSecondPerson, engine.SinceUnchanged, other, "ok"},
		{commands.WhenUnchangedSecondPerson, engine.SinceRestarted, alice, "ok"},
		{commands.WhenUnchangedSecondPerson, engine.SinceUnknown, alice, "ok"},
		{commands.WhenUnchangedRefuse, engine.SinceUnchanged, other, ops.Forbidden},
		{commands.WhenUnchangedRefuse, engine.SinceNone, alice, "ok"},
	} {
		o, f, _ := newOps(t, withRule(tc.rule), ops.Config{NoHandOff: true})
		f.since = tc.since
		if tc.rule == commands.WhenUnchangedSecondPerson && tc.by == alice {
			// The terminal's alice is the same principal.
			termAlice := ops.TerminalCaller(o.Policy(), "alice")
			if got := code(err2(o.Approve(ctx, termAlice, ops.Approval{Token: "p_U0ALICE001"}))); got != tc.want {
				t.Errorf("when_unchanged %q, %s, terminal alice approving her own: %s, want %s", tc.rule, tc.since, got, tc.want)
			}
		}
		_, err := o.Approve(ctx, tc.by, ops.Approval{Token: "p_U0ALICE001"})
		if got := code(err); got != tc.want {
			t.Errorf("when_unchanged %q, consumers %s, approved by %s: %s, want %s", tc.rule, tc.since, tc.by.Identity, got, tc.want)
			continue
		}
		if r, ok := ops.IsRefusal(err); ok && (!strings.Contains(r.Reason, "approval.when_unchanged") || !strings.Contains(r.Reason, "since before these messages failed")) {
			t.Errorf("when_unchanged %q: refusal %q does not name the rule and why", tc.rule, r.Reason)
		}
		if r, ok := ops.IsRefusal(err); ok && len(f.approved) > 0 {
			t.Errorf("refused (%s) but the engine approved %v", r.Code, f.approved)
		}
	}

	// The trail (and the dashboard's audit page) says so of the preview.
	o, f, tr := newOps(t, base, ops.Config{})
	f.since = engine.SinceUnchanged
	if _, err := o.Preview(ctx, alice, engine.Selection{DLQ: "q"}); err != nil {
		t.Fatal(err)
	}
	if es := tr.Find("", "preview", "ok"); len(es) != 1 || es[0].Detail != "consumers not restarted since these messages failed: t" {
		t.Errorf("preview entries %+v", es)
	}
}
