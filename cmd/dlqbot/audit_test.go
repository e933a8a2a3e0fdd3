package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// TestAuditCommand: dlqbot audit prints the trail in Redis as a table, and
// with --json as one JSON line per entry, filtered; a bad filter is a
// usage error (exit 2). With a permissions file it shows what the OS
// user's principal may read: nothing when the file names no principal
// for the OS user, the orders.* entries for one that may read orders.*.
func TestAuditCommand(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	rdb, err := store.Open(testkit.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	st, err := store.New(store.Config{Prefix: env["DLQBOT_REDIS_PREFIX"]}, rdb, engine.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []audit.Entry{
		{Principal: "runbook", Identity: "api:runbook", FrontEnd: "api", Op: audit.OpPreview, Outcome: audit.OutcomeOK, DLQ: "orders.dlq", Messages: 7},
		{Principal: "viewer", Identity: "api:viewer", FrontEnd: "dashboard", Op: audit.OpPause, Outcome: audit.OutcomeRefused, Code: "forbidden", ReplayID: "r_1", DLQ: "orders.dlq"},
	} {
		if err := st.Audit().Record(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	out, _, code := dlqbot(t, env, "audit")
	if code != 0 || !strings.Contains(out, "OPERATION") || !strings.Contains(out, "refused: forbidden") || !strings.Contains(out, "viewer (api:viewer)") {
		t.Fatalf("table: exit %d\n%s", code, out)
	}
	out, _, code = dlqbot(t, env, "audit", "--json", "op=pause")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 1 {
		t.Fatalf("--json op=pause: exit %d\n%s", code, out)
	}
	var e audit.Entry
	if err := json.Unmarshal([]byte(lines[0]), &e); err != nil || e.Principal != "viewer" || e.FrontEnd != "dashboard" || e.ID == "" {
		t.Errorf("line %q: %+v, %v", lines[0], e, err)
	}
	if out, _, code = dlqbot(t, env, "audit", "--json", "colour=red"); code != exitUsage || !strings.Contains(out, `"error"`) {
		t.Errorf("a bad filter: exit %d\n%s", code, out)
	}
	for _, e := range []audit.Entry{
		{Principal: "runbook", Identity: "api:runbook", FrontEnd: "api", Op: audit.OpPreview, Outcome: audit.OutcomeOK, DLQ: "payments.dlq"},
	} {
		if err := st.Audit().Record(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	perm := func(osUser string) string {
		path := filepath.Join(t.TempDir(), "permissions.yaml")
		doc := "principals:\n  - name: me\n    os_users: [" + osUser + "]\nroles:\n  - name: orders\n    principals: [me]\n    grants:\n      - queues: [\"orders.*\"]\n        actions: [read]\n"
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if out, _, code = dlqbot(t, merge(env, "DLQBOT_PERMISSIONS", perm("somebody-else")), "audit"); code != 0 || !strings.Contains(out, "No audit entries match.") {
		t.Errorf("an OS user the policy does not name: exit %d\n%s", code, out)
	}
	if u := currentUser(); u != "" {
		out, _, code = dlqbot(t, merge(env, "DLQBOT_PERMISSIONS", perm(u)), "audit", "--json")
		if n := strings.Count(out, `"dlq":"orders.dlq"`); code != 0 || n != 2 || strings.Contains(out, "payments.dlq") {
			t.Errorf("%s, who may read orders.*: exit %d, %d orders.dlq entries\n%s", u, code, n, out)
		}
	}
}
