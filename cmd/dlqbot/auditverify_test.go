package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// TestAuditVerifyCommand: `dlqbot audit verify` exits 0 on an intact
// trail and, after an entry is deleted from Redis, 1 naming the entry
// where the chain breaks and that entries before it were deleted.
func TestAuditVerifyCommand(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	rdb, err := store.Open(testkit.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	st, err := store.New(store.Config{Prefix: env["DLQBOT_REDIS_PREFIX"], SigningKey: []byte(testSigningKey)}, rdb, engine.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{audit.OpPreview, audit.OpApprove, audit.OpPause} {
		e := audit.Entry{Principal: "runbook", Identity: "api:runbook", FrontEnd: "api", Op: op, Outcome: audit.OutcomeOK, DLQ: "orders.dlq"}
		if err := st.Audit().Record(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	out, _, code := dlqbot(t, env, "audit", "verify")
	if code != exitOK || !strings.Contains(out, "intact: 3 entries") {
		t.Fatalf("intact trail: exit %d\n%s", code, out)
	}
	entries, err := st.Audit().List(context.Background(), audit.Filter{})
	if err != nil || len(entries) != 3 {
		t.Fatal(entries, err)
	}
	if err := rdb.XDel(context.Background(), env["DLQBOT_REDIS_PREFIX"]+"audit", entries[1].ID).Err(); err != nil {
		t.Fatal(err)
	}
	out, _, code = dlqbot(t, env, "audit", "verify", "--json")
	doc := oneJSON(t, out)
	br, _ := doc["break"].(map[string]any)
	if code != exitFailed || doc["intact"] != false || br["id"] != entries[2].ID || br["kind"] != "deleted" {
		t.Fatalf("after a deletion: exit %d %v, want 1 with the break at %s (deleted)", code, doc, entries[2].ID)
	}
	if out, _, code = dlqbot(t, env, "audit", "verify", "now"); code != exitUsage {
		t.Fatalf("verify with an argument: exit %d\n%s", code, out)
	}
}
