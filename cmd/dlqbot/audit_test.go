package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// TestAuditCommand: dlqbot audit prints the trail in Redis as a table, and
// with --json as one JSON line per entry, filtered; a bad filter is a
// usage error (exit 2).
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
}
