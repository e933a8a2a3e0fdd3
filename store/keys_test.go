package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// hashTag returns what Redis Cluster hashes for key: the first non-empty
// {…} group, or the whole key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

func TestKeysShareSlots(t *testing.T) {
	t.Parallel()
	k := keys{p: DefaultPrefix}
	for _, key := range []string{k.replay("r_abc"), k.lease("r_abc"), k.ledger("r_abc"), k.acks("r_abc")} {
		if !strings.HasPrefix(key, "dlqbot:{r_abc}:") || hashTag(key) != "r_abc" {
			t.Errorf("replay key %q hashes %q", key, hashTag(key))
		}
	}
	for _, key := range []string{k.token("p_tok"), k.tokenUsed("p_tok")} {
		if hashTag(key) != "p_tok" {
			t.Errorf("token key %q hashes %q", key, hashTag(key))
		}
	}
	if hashTag(k.auditAnchor()) != hashTag(k.audit()) {
		t.Errorf("the audit anchor %q hashes %q, the trail %q: one script writes both", k.auditAnchor(), hashTag(k.auditAnchor()), hashTag(k.audit()))
	}
	for _, key := range []string{k.replays(), k.schedule(), k.workers(), k.jobs(), k.audit(), k.sent("orders.dlq"), k.claims("orders.dlq"), k.readers("orders.dlq")} {
		if !strings.HasPrefix(key, "dlqbot:") || strings.ContainsAny(key, "{}") {
			t.Errorf("global key %q", key)
		}
	}
	if hashTag(k.alert("orders.dlq")) != hashTag(k.alertSnooze("orders.dlq")) {
		t.Errorf("an alert %q and its snooze %q hash apart: one script reads both", k.alert("orders.dlq"), k.alertSnooze("orders.dlq"))
	}
	for _, bad := range []string{"", "a{b", "a}b", "a b", strings.Repeat("x", maxIDLen+1)} {
		if checkTag("id", bad) == nil {
			t.Errorf("checkTag accepted %q", bad)
		}
	}
}

// TestDocListsEveryKey renders each key function of keys.go with the
// placeholders doc.go uses and checks doc.go's layout table lists it, so
// the documented layout cannot drift from the code again.
func TestDocListsEveryKey(t *testing.T) {
	t.Parallel()
	k := keys{p: "P"}
	rendered := map[string]string{
		"token": k.token("<token>"), "tokenUsed": k.tokenUsed("<token>"), "tokenMessage": k.tokenMessage("<token>"),
		"replay": k.replay("<replay>"), "lease": k.lease("<replay>"), "ledger": k.ledger("<replay>"), "acks": k.acks("<replay>"),
		"events": k.events("<replay>"), "returns": k.returns("<replay>"), "returnLog": k.returnLog("<replay>"),
		"sent": k.sent("<dlq>"), "sentFloor": k.sentFloor("<dlq>"), "claims": k.claims("<dlq>"), "readers": k.readers("<dlq>"), "readMark": k.readMark("<vhost>", "<queue>"), "tapArrived": k.tapArrived("<dlq>"), "tapGap": k.tapGap("<dlq>"),
		"returnFloor": k.returnFloor("<replay>"), "tapFloor": k.tapFloor("<dlq>"),
		"taps": k.taps(), "replays": k.replays(), "active": k.active(), "schedule": k.schedule(),
		"workers": k.workers(), "jobs": k.jobs(), "audit": k.audit(), "window": k.window("<name>"),
		"slackRequest": k.slackRequest("<sighash>"), "slackRefs": k.slackRefs("<replay>"),
		"dashboardSignedOut": k.dashboardSignedOut("<session>"),
		"auditAnchor":        k.auditAnchor(), "auditRate": k.auditRateDoc(),
		"alert": k.alert("<dlq>"), "alertSnooze": k.alertSnooze("<dlq>"), "alertGroups": k.alertGroups("<dlq>"), "alerts": k.alerts(),
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "keys.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil {
			continue
		}
		if id, ok := fn.Recv.List[0].Type.(*ast.Ident); ok && id.Name == "keys" {
			if _, ok := rendered[fn.Name.Name]; !ok {
				t.Errorf("keys.%s is new: add it to doc.go's layout and to this test", fn.Name.Name)
			}
		}
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range rendered {
		if !strings.Contains(string(doc), "//\t"+key+" ") {
			t.Errorf("doc.go's key layout does not list %s (keys.%s)", key, name)
		}
	}
}

// auditRateDoc renders auditRate with doc.go's placeholders.
func (k keys) auditRateDoc() string { return k.p + "auditrate:<p>:<minute>" }
