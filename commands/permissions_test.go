package commands

import (
	"errors"
	"strings"
	"testing"
)

const samplePolicy = `
roles:
  - name: sre
    users: [U012ABCDEF]
    usergroups: [S0123ABCD]
    grants:
      - queues: ["orders.*", "payments.*"]
        actions: [read, replay, publish]
  - name: support
    users: [U0SUPPORT1]
    grants:
      - queues: ["*.dlq"]
        actions: [read]
  - name: scratch
    usergroups: [S0DEVS]
    grants:
      - queues: ["scratch.??", "tenant/*/orders"]
        actions: [publish]
approval:
  require_distinct_approver: true
`

func mustPolicy(t *testing.T, src string) *Policy {
	t.Helper()
	p, err := ParsePolicy([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAllowed(t *testing.T) {
	p := mustPolicy(t, samplePolicy)
	tests := []struct {
		user   string
		groups []string
		action Action
		queue  string
		want   bool
	}{
		{"U012ABCDEF", nil, ActionRead, "orders.dlq", true},
		{"U012ABCDEF", nil, ActionReplay, "orders.dlq", true},
		{"U012ABCDEF", nil, ActionPublish, "orders", false}, // "orders.*" needs the dot
		{"U012ABCDEF", nil, ActionPublish, "orders.created.v2", true},
		{"U012ABCDEF", nil, ActionRead, "payments.dlq", true},
		{"U012ABCDEF", nil, ActionRead, "xorders.dlq", false},
		{"UOTHER", []string{"S0123ABCD"}, ActionReplay, "payments.dlq", true}, // through the user group
		{"UOTHER", []string{"S9999"}, ActionRead, "payments.dlq", false},
		{"UOTHER", nil, ActionRead, "orders.dlq", false},
		{"", nil, ActionRead, "orders.dlq", false},
		{"U0SUPPORT1", nil, ActionRead, "billing.dlq", true},
		{"U0SUPPORT1", nil, ActionRead, "billing.v2.dlq", true}, // * spans dots
		{"U0SUPPORT1", nil, ActionRead, "billing.dlq.old", false},
		{"U0SUPPORT1", nil, ActionReplay, "billing.dlq", false},
		{"U0SUPPORT1", nil, ActionPublish, "billing.dlq", false},
		{"UX", []string{"S0DEVS"}, ActionPublish, "scratch.01", true},
		{"UX", []string{"S0DEVS"}, ActionPublish, "scratch.1", false}, // ? is exactly one
		{"UX", []string{"S0DEVS"}, ActionPublish, "scratch.001", false},
		{"UX", []string{"S0DEVS"}, ActionPublish, "tenant/acme/orders", true}, // * spans slashes
		{"UX", []string{"S0DEVS"}, ActionPublish, "tenant/a/b/orders", true},
		{"UX", []string{"S0DEVS"}, ActionRead, "tenant/acme/orders", false},
	}
	for _, tt := range tests {
		if got := p.Allowed(tt.user, tt.groups, tt.action, tt.queue); got != tt.want {
			t.Errorf("Allowed(%s, %v, %s, %s) = %v, want %v", tt.user, tt.groups, tt.action, tt.queue, got, tt.want)
		}
	}
}

func TestNilPolicyAllowsEverything(t *testing.T) {
	var p *Policy
	for _, a := range Actions {
		if !p.Allowed("", nil, a, "anything") {
			t.Errorf("nil policy refused %s", a)
		}
	}
	if p.NeedsDistinctApprover(1_000_000) {
		t.Error("nil policy requires a distinct approver")
	}
	if err := p.CheckApprove("U1", nil, "q", []string{"t"}); err != nil {
		t.Error(err)
	}
	if err := p.CheckPreview("U1", nil, "q"); err != nil {
		t.Error(err)
	}
	if p.Groups() != nil {
		t.Error("nil policy names groups")
	}
}

func TestMatchGlob(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true},
		{"*", "a.b/c", true},
		{"orders.*", "orders.", true},
		{"orders.*", "orders", false},
		{"*.dlq", ".dlq", true},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
		{"a*a*a*a*b", strings.Repeat("a", 200), false},
		{"?", "é", true},
		{"??", "é", false},
		{`orders.\*`, "orders.*", true},
		{`orders.\*`, "orders.x", false},
		{`a\?`, "a?", true},
		{"exact", "exact", true},
		{"exact", "Exact", false},
	}
	for _, tt := range tests {
		if got := matchGlob(tt.pattern, tt.name); got != tt.want {
			t.Errorf("matchGlob(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestDistinctApprover(t *testing.T) {
	always := mustPolicy(t, samplePolicy)
	above := mustPolicy(t, strings.Replace(samplePolicy, "require_distinct_approver: true", "require_distinct_approver: 100", 1))
	never := mustPolicy(t, strings.Replace(samplePolicy, "require_distinct_approver: true", "require_distinct_approver: false", 1))
	zero := mustPolicy(t, strings.Replace(samplePolicy, "require_distinct_approver: true", "require_distinct_approver: 0", 1))
	unset := mustPolicy(t, strings.Replace(samplePolicy, "approval:\n  require_distinct_approver: true\n", "", 1))
	tests := []struct {
		p        *Policy
		messages int
		want     bool
	}{
		{always, 1, true}, {always, 10_000, true},
		{above, 100, false}, {above, 101, true}, {above, 1, false},
		{never, 10_000, false}, {unset, 10_000, false},
		{zero, 1, true},
	}
	for i, tt := range tests {
		if got := tt.p.NeedsDistinctApprover(tt.messages); got != tt.want {
			t.Errorf("%d: NeedsDistinctApprover(%d) = %v, want %v", i, tt.messages, got, tt.want)
		}
	}
}

func TestChecks(t *testing.T) {
	p := mustPolicy(t, samplePolicy)
	tests := []struct {
		name     string
		err      error
		mentions []string // nil: allowed
	}{
		{"preview allowed", p.CheckPreview("U0SUPPORT1", nil, "billing.dlq"), nil},
		{"preview refused", p.CheckPreview("U0SUPPORT1", nil, "billing.queue"), []string{"You need `read` on billing.queue to preview it"}},
		{"approve refused both", p.CheckApprove("U0SUPPORT1", nil, "orders.dlq", []string{"payments", "orders", "orders"}),
			[]string{"You need `replay` on orders.dlq and `publish` on orders, payments to approve this replay."}},
		{"approve refused publish only", p.CheckApprove("U012ABCDEF", nil, "orders.dlq", []string{"orders.created", "billing"}),
			[]string{"You need `publish` on billing to approve this replay."}},
		{"approve allowed", p.CheckApprove("U012ABCDEF", nil, "orders.dlq", []string{"orders.created", ""}), nil},
		{"stranger", p.CheckPreview("UNOBODY", nil, "orders.dlq"), []string{"no role"}},
		{"pause with read", p.CheckControl("U0SUPPORT1", nil, "pause", "billing.dlq", []string{"billing"}), nil},
		{"cancel needs replay", p.CheckControl("U0SUPPORT1", nil, "cancel", "billing.dlq", []string{"billing"}),
			[]string{"`replay` on billing.dlq to cancel this replay (a cancelled replay cannot be resumed)"}},
		{"resume needs replay", p.CheckControl("U0SUPPORT1", nil, "resume", "billing.dlq", []string{"billing"}),
			[]string{"`replay` on billing.dlq", "`publish` on billing", "to resume this replay"}},
		{"check needs read", p.CheckRead("UX", []string{"S0DEVS"}, "orders.dlq", "to check this replay"), []string{"`read` on orders.dlq to check this replay"}},
		{"park", p.CheckPark("U012ABCDEF", nil, "orders.dlq", "orders.parked"), nil},
		{"park refused", p.CheckPark("U012ABCDEF", nil, "orders.dlq", "parking"), []string{"`publish` on parking to park"}},
	}
	for _, tt := range tests {
		if tt.mentions == nil {
			if tt.err != nil {
				t.Errorf("%s: %v", tt.name, tt.err)
			}
			continue
		}
		var fe *ForbiddenError
		if !errors.Is(tt.err, ErrForbidden) || !errors.As(tt.err, &fe) {
			t.Errorf("%s: %v is not a ForbiddenError", tt.name, tt.err)
			continue
		}
		for _, m := range tt.mentions {
			if !strings.Contains(tt.err.Error(), m) {
				t.Errorf("%s: %q does not mention %q", tt.name, tt.err, m)
			}
		}
	}
}

func TestGroups(t *testing.T) {
	p := mustPolicy(t, samplePolicy)
	if got := strings.Join(p.Groups(), ","); got != "S0123ABCD,S0DEVS" {
		t.Errorf("Groups() = %s", got)
	}
}
