package commands

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const principalsPolicy = `
principals:
  - name: runbook
    token_sha256: %s
  - name: alice-cli
    token_sha256: %s
    as_user: U0ALICE001
roles:
  - name: automation
    principals: [runbook]
    grants:
      - queues: ["orders.*"]
        actions: [read, replay, publish]
  - name: sre
    users: [U0ALICE001]
    grants:
      - queues: ["*"]
        actions: [read]
approval:
  require_distinct_approver: true
`

func policyWithTokens(t *testing.T, a, b string) *Policy {
	t.Helper()
	return mustPolicy(t, fmt.Sprintf(principalsPolicy, HashToken(a), HashToken(b)))
}

func TestPrincipalLookup(t *testing.T) {
	p := policyWithTokens(t, "secret-runbook", "secret-alice")
	pr, ok := p.Principal("secret-runbook")
	if !ok || pr.Name != "runbook" || pr.ID() != "api:runbook" {
		t.Fatalf("runbook = %+v, %v", pr, ok)
	}
	al, ok := p.Principal("secret-alice")
	if !ok || al.ID() != "U0ALICE001" {
		t.Fatalf("alice = %+v, %v", al, ok)
	}
	for _, bad := range []string{"", "secret-runbook ", "SECRET-RUNBOOK", HashToken("secret-runbook")} {
		if _, ok := p.Principal(bad); ok {
			t.Errorf("token %q accepted", bad)
		}
	}
	var nilPolicy *Policy
	if _, ok := nilPolicy.Principal("secret-runbook"); ok {
		t.Error("a nil policy accepted a token")
	}
	// Roles: runbook by name, alice as her Slack user.
	if !p.Allowed(pr.ID(), nil, ActionReplay, "orders.dlq") || p.Allowed(pr.ID(), nil, ActionRead, "payments.dlq") {
		t.Error("runbook's grants are wrong")
	}
	if !p.Allowed(al.ID(), nil, ActionRead, "payments.dlq") || p.Allowed(al.ID(), nil, ActionReplay, "orders.dlq") {
		t.Error("alice's token does not have exactly alice's grants")
	}
	// "api:runbook" is not a Slack user, and a Slack user named like a
	// principal is not that principal.
	if p.Allowed("runbook", nil, ActionRead, "orders.dlq") {
		t.Error("a bare principal name was allowed")
	}
}

func TestParsePrincipalErrors(t *testing.T) {
	h := HashToken("x")
	role := "roles:\n  - name: r\n    principals: [ci]\n    grants:\n      - queues: [a]\n        actions: [read]\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"short hash", "principals:\n  - name: ci\n    token_sha256: abc\n" + role, "64 hex characters"},
		{"bad name", "principals:\n  - name: CI Bot\n    token_sha256: " + h + "\n" + role, "lower-case"},
		{"no hash", "principals:\n  - name: ci\n" + role, "no token_sha256"},
		{"twice", "principals:\n  - name: ci\n    token_sha256: " + h + "\n  - name: ci\n    token_sha256: " + HashToken("y") + "\n" + role, "defined twice"},
		{"same hash", "principals:\n  - name: ci\n    token_sha256: " + h + "\n  - name: cd\n    token_sha256: " + h + "\n" + role, "same token_sha256"},
		{"undefined", role, `principal "ci", which is not defined`},
		{"mapped in role", "principals:\n  - name: ci\n    token_sha256: " + h + "\n    as_user: U0ALICE001\n" + role, "acts as Slack user"},
		{"bad user", "principals:\n  - name: ci\n    token_sha256: " + h + "\n    as_user: alice\n" + role, "not a Slack member id"},
		{"unknown key", "principals:\n  - name: ci\n    token: " + h + "\n" + role, `unknown key "token"`},
	} {
		_, err := ParsePolicy([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestPrincipalOSUsersAndPerson: os_users name the terminal's users of a
// principal (with or without a token), needs_human is read, and Person
// makes a terminal user, a personal token and the Slack user one person
// for the four-eyes rule; an OS user the policy does not name stays
// itself.
func TestPrincipalOSUsersAndPerson(t *testing.T) {
	p, err := ParsePolicy([]byte(`principals:
  - name: alice
    token_sha256: ` + HashToken("a") + `
    as_user: U012ALICE
    os_users: [alice, alice.admin]
  - name: ci
    os_users: [jenkins]
    needs_human: true
roles:
  - name: r
    users: [U012ALICE]
    principals: [ci]
    grants:
      - queues: [q]
        actions: [read]
approval:
  require_distinct_approver: 100
  window: 2h
`))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{
		"terminal:alice": "U012ALICE", "terminal:alice.admin": "U012ALICE", "api:alice": "U012ALICE", "U012ALICE": "U012ALICE",
		"terminal:jenkins": "api:ci", "terminal:bob": "terminal:bob", "api:nobody": "api:nobody",
	} {
		if got := p.Person(id); got != want {
			t.Errorf("Person(%q) = %q, want %q", id, got, want)
		}
	}
	if ci, ok := p.PrincipalOfOS("jenkins"); !ok || !ci.NeedsHuman || ci.HasToken {
		t.Errorf("ci: %+v %v", ci, ok)
	}
	if _, ok := p.Principal(""); ok {
		t.Error("an empty token found a principal without a token")
	}
	if p.ApprovalWindow() != 2*time.Hour || p.Approval.Above != 100 {
		t.Errorf("approval %+v", p.Approval)
	}
	var nilPolicy *Policy
	if nilPolicy.ApprovalWindow() != DefaultApprovalWindow || nilPolicy.Person("terminal:x") != "terminal:x" {
		t.Error("nil policy")
	}
	for _, bad := range []struct{ yaml, want string }{
		{"principals:\n  - name: x\n", "no token_sha256 (and no os_users)"},
		{"principals:\n  - name: x\n    os_users: [a]\n  - name: y\n    os_users: [a]\n", "another principal names already"},
		{"principals:\n  - name: x\n    os_users: [\"a b\"]\n", "not an OS user name"},
		{"principals:\n  - name: x\n    os_users: [a]\n    needs_human: maybe\n", "needs_human must be true or false"},
		{"approval:\n  window: soon\n", "window must be a duration"},
	} {
		_, err := ParsePolicy([]byte(bad.yaml + "roles:\n  - name: r\n    users: [U1]\n    grants:\n      - queues: [q]\n        actions: [read]\n"))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.yaml, err, bad.want)
		}
	}
}
