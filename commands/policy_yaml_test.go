package commands

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParsePolicy(t *testing.T) {
	p := mustPolicy(t, samplePolicy)
	want := Role{
		Name: "sre", Users: []string{"U012ABCDEF"}, UserGroups: []string{"S0123ABCD"},
		Grants: []Grant{{Queues: []string{"orders.*", "payments.*"}, Actions: []Action{ActionRead, ActionReplay, ActionPublish}}},
	}
	if len(p.Roles) != 3 || !reflect.DeepEqual(p.Roles[0], want) {
		t.Fatalf("roles = %#v", p.Roles)
	}
	if !p.Approval.DistinctApprover || p.Approval.Above != 0 {
		t.Errorf("approval = %+v", p.Approval)
	}
}

func TestParsePolicyForms(t *testing.T) {
	// Block lists, a single scalar for a list, anchors, upper-case actions.
	p := mustPolicy(t, `
roles:
  - name: oncall
    users:
      - U012ABCDEF
      - W0ENTERPRISE
    usergroups: S0123ABCD
    grants:
      - queues: "*"
        actions: &ro [READ]
  - name: viewers
    usergroups: [S0VIEW]
    grants:
      - {queues: ["a.*"], actions: *ro}
`)
	if got := p.Roles[0].Users; !reflect.DeepEqual(got, []string{"U012ABCDEF", "W0ENTERPRISE"}) {
		t.Errorf("users = %v", got)
	}
	if got := p.Roles[0].UserGroups; !reflect.DeepEqual(got, []string{"S0123ABCD"}) {
		t.Errorf("usergroups = %v", got)
	}
	if got := p.Roles[1].Grants[0].Actions; !reflect.DeepEqual(got, []Action{ActionRead}) {
		t.Errorf("aliased actions = %v", got)
	}
	if !p.Allowed("UANY", []string{"S0123ABCD"}, ActionRead, "any.queue/at.all") {
		t.Error(`"*" does not match everything`)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	role := func(body string) string {
		return "roles:\n  - name: sre\n    users: [U012ABCDEF]\n" + body
	}
	grant := func(queues, actions string) string {
		return role("    grants:\n      - queues: " + queues + "\n        actions: " + actions + "\n")
	}
	tests := []struct {
		name, src string
		mentions  []string
	}{
		{"empty file", "", []string{"empty"}},
		{"comment only", "# nothing\n", []string{"empty"}},
		{"bad yaml", "roles: [\n", []string{"yaml"}},
		{"top not mapping", "- a\n", []string{"line 1", "mapping"}},
		{"no roles", "approval:\n  require_distinct_approver: true\n", []string{"no roles"}},
		{"unknown top key", "role:\n  - name: x\n", []string{"line 1", `"role"`, `did you mean "roles"`}},
		{"unknown role key", role("    grant:\n      - queues: [a]\n"), []string{"line 4", `"grant"`, `"grants"`}},
		{"unknown grant key", role("    grants:\n      - queues: [a]\n        actions: [read]\n        vhost: x\n"), []string{"line 7", `"vhost"`}},
		{"unknown action", grant(`["orders.*"]`, "[read, write]"), []string{"line 6", `"write"`, "read, replay and publish"}},
		{"typo action", grant(`["orders.*"]`, "[raed]"), []string{`did you mean "read"`}},
		{"empty role name", "roles:\n  - name: \"\"\n    users: [U1]\n    grants:\n      - queues: [a]\n        actions: [read]\n", []string{"line 2", "no name"}},
		{"missing role name", "roles:\n  - users: [U1]\n    grants:\n      - queues: [a]\n        actions: [read]\n", []string{"no name"}},
		{"no members", "roles:\n  - name: sre\n    grants:\n      - queues: [a]\n        actions: [read]\n", []string{`"sre"`, "no users, usergroups or principals"}},
		{"no grants", role(""), []string{`"sre"`, "no grants"}},
		{"no queues", grant("[]", "[read]"), []string{"no queues"}},
		{"no actions", grant("[a]", "[]"), []string{"no actions"}},
		{"class glob", grant(`["orders.[ab]"]`, "[read]"), []string{"line 5", `"orders.[ab]"`, "only * and ?"}},
		{"brace glob", grant(`["{a,b}"]`, "[read]"), []string{`"{a,b}"`}},
		{"space glob", grant(`["a b"]`, "[read]"), []string{"white space"}},
		{"empty glob", grant(`[""]`, "[read]"), []string{"empty"}},
		{"lone backslash", grant(`["a\\"]`, "[read]"), []string{"lone"}},
		{"user name not id", "roles:\n  - name: sre\n    users: [alice]\n", []string{"line 3", `"alice"`, "member id"}},
		{"group handle", "roles:\n  - name: sre\n    usergroups: [\"@sre\"]\n", []string{`"@sre"`, "user group id"}},
		{"role defined twice", "roles:\n" + strings.Repeat("  - name: sre\n    users: [U1]\n    grants:\n      - queues: [a]\n        actions: [read]\n", 2), []string{"line 7", `"sre" is defined twice`}},
		{"duplicate key", role("    users: [U2]\n"), []string{"line 4", `"users" appears twice`}},
		{"approval string", samplePolicy + "  require_distinct_approver: sometimes\n", []string{"appears twice"}},
		{"approval word", strings.Replace(samplePolicy, "require_distinct_approver: true", "require_distinct_approver: sometimes", 1), []string{"line 20", `"sometimes"`}},
		{"approval negative", strings.Replace(samplePolicy, "require_distinct_approver: true", "require_distinct_approver: -1", 1), []string{`"-1"`}},
		{"approval unknown", strings.Replace(samplePolicy, "require_distinct_approver", "distinct", 1), []string{`"distinct"`}},
		{"when_unchanged word", strings.Replace(samplePolicy, "require_distinct_approver: true", "when_unchanged: block", 1), []string{"line 20", "warn, second_person or refuse", `"block"`}},
		{"grants not list", role("    grants: read\n"), []string{"line 4", "a grant must be a mapping"}},
		{"name not scalar", "roles:\n  - name: [a]\n", []string{"name must be a single value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(tt.src))
			if err == nil {
				t.Fatalf("no error; policy %#v", p)
			}
			if !strings.HasPrefix(err.Error(), "commands: parse policy: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			for _, m := range tt.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
}

func TestLoadPolicy(t *testing.T) {
	p, err := LoadPolicy("")
	if p != nil || err != nil {
		t.Fatalf("LoadPolicy(\"\") = %v, %v; want access control off", p, err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "permissions.yaml")
	if err := os.WriteFile(good, []byte(samplePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := LoadPolicy(good); err != nil || len(p.Roles) != 3 {
		t.Fatalf("LoadPolicy(good) = %v, %v", p, err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("roles:\n  - nme: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPolicy(bad); err == nil || !strings.Contains(err.Error(), "commands: load policy "+bad+": line 2") {
		t.Fatalf("LoadPolicy(bad) = %v", err)
	}
	if _, err := LoadPolicy(filepath.Join(dir, "missing.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LoadPolicy(missing) = %v", err)
	}
}

// TestParsePolicyWhenUnchanged: approval.when_unchanged reads its three
// words, and its zero value (not given) is warn.
func TestParsePolicyWhenUnchanged(t *testing.T) {
	if p := mustPolicy(t, samplePolicy); p.Approval.WhenUnchanged != "" {
		t.Errorf("default when_unchanged = %q, want \"\" (warn)", p.Approval.WhenUnchanged)
	}
	for _, w := range []WhenUnchanged{WhenUnchangedWarn, WhenUnchangedSecondPerson, WhenUnchangedRefuse} {
		p := mustPolicy(t, strings.Replace(samplePolicy, "require_distinct_approver: true", "require_distinct_approver: true\n  when_unchanged: "+string(w), 1))
		if p.Approval.WhenUnchanged != w || !p.Approval.DistinctApprover {
			t.Errorf("when_unchanged %s: approval = %+v", w, p.Approval)
		}
	}
}
