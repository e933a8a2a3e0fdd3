package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/audit"
)

// recordN appends n entries by principal, a minute apart.
func recordN(t *testing.T, e *testEnv, tr *Audit, n int, principal string) {
	t.Helper()
	for i := 0; i < n; i++ {
		e.clock.Advance(time.Minute)
		err := tr.Record(e.ctx, audit.Entry{Principal: principal, Identity: "api:" + principal, FrontEnd: "api",
			Op: audit.OpPause, Outcome: audit.OutcomeOK, ReplayID: fmt.Sprintf("r_%d", i), DLQ: "orders.dlq"})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// rewriteTrail rebuilds the trail as edit returns it, as whoever can
// write Redis would (a stream cannot be changed in the middle in place).
func rewriteTrail(t *testing.T, e *testEnv, edit func([]redis.XMessage) []redis.XMessage) []redis.XMessage {
	t.Helper()
	key := e.st.b.k.audit()
	msgs, err := e.rdb.XRange(e.ctx, key, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	msgs = edit(msgs)
	if err := e.rdb.Del(e.ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		vals := []any{}
		for _, f := range []string{"e", "p", "h"} {
			if v, ok := m.Values[f]; ok {
				vals = append(vals, f, v)
			}
		}
		if err := e.rdb.XAdd(e.ctx, &redis.XAddArgs{Stream: key, ID: m.ID, Values: vals}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return msgs
}

func verifyBreak(t *testing.T, e *testEnv, tr *Audit, wantID, wantKind string) {
	t.Helper()
	v, err := tr.Verify(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.Break == nil || v.Break.ID != wantID || v.Break.Kind != wantKind {
		t.Fatalf("verify: %+v (break %+v), want %s at %s", v, v.Break, wantKind, wantID)
	}
}

// TestAuditVerifyFindsTheFirstBreak: an intact chained trail verifies;
// an entry edited in Redis, one deleted, one forged (inserted with a hash
// made without the signing key) and, without a key, one inserted with a
// valid hash are each found, at the first entry where the chain breaks.
func TestAuditVerifyFindsTheFirstBreak(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		signed bool
		edit   func([]redis.XMessage, *Audit) []redis.XMessage
		at     int // index of the entry reported, in the edited trail
		kind   string
	}{
		{"edited", true, func(ms []redis.XMessage, _ *Audit) []redis.XMessage {
			ms[2].Values["e"] = strings.Replace(ms[2].Values["e"].(string), `"outcome":"ok"`, `"outcome":"refused"`, 1)
			return ms
		}, 2, AuditEdited},
		{"deleted", true, func(ms []redis.XMessage, _ *Audit) []redis.XMessage {
			return append(ms[:2:2], ms[3:]...)
		}, 2, AuditDeleted},
		{"deleted first", true, func(ms []redis.XMessage, _ *Audit) []redis.XMessage {
			return ms[1:]
		}, 0, AuditDeleted},
		{"forged", true, func(ms []redis.XMessage, tr *Audit) []redis.XMessage {
			return insertAfter(ms, 1, tr, sha256Hash)
		}, 2, AuditEdited},
		{"inserted without a key", false, func(ms []redis.XMessage, tr *Audit) []redis.XMessage {
			return insertAfter(ms, 1, tr, tr.b.auditHash)
		}, 2, AuditInserted},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var e *testEnv
			if c.signed {
				e, _ = signedEnv(t)
			} else {
				e = newEnv(t)
			}
			tr := e.st.Audit()
			recordN(t, e, tr, 5, "runbook")
			if v, err := tr.Verify(e.ctx); err != nil || v.Break != nil || v.Entries != 5 {
				t.Fatalf("intact: %+v %v", v, err)
			}
			ms := rewriteTrail(t, e, func(ms []redis.XMessage) []redis.XMessage { return c.edit(ms, tr) })
			verifyBreak(t, e, tr, ms[c.at].ID, c.kind)
		})
	}
}

// sha256Hash is auditHash as a forger without the key computes it.
func sha256Hash(prev string, entry []byte) string {
	b := &base{}
	return b.auditHash(prev, entry)
}

// insertAfter adds an entry after ms[i], chained to it with hash.
func insertAfter(ms []redis.XMessage, i int, tr *Audit, hash func(string, []byte) string) []redis.XMessage {
	var ms0 int64
	_, _ = fmt.Sscanf(ms[i].ID, "%d-", &ms0)
	e := `{"principal":"runbook","identity":"api:runbook","front_end":"api","op":"approve","outcome":"ok"}`
	prev := ms[i].Values["h"].(string)
	x := redis.XMessage{ID: fmt.Sprintf("%d-0", ms0+1), Values: map[string]any{"e": e, "p": prev, "h": hash(prev, []byte(e))}}
	out := append([]redis.XMessage{}, ms[:i+1]...)
	out = append(out, x)
	return append(out, ms[i+1:]...)
}

// TestAuditCapKeepsTheChainVerifiable: past the cap the oldest entries
// are trimmed and the anchor keeps the rest verifiable; deleting the
// oldest that is left is still found.
func TestAuditCapKeepsTheChainVerifiable(t *testing.T) {
	t.Parallel()
	e, _ := signedEnv(t, func(c *Config) { c.AuditMaxLen = 3 })
	tr := e.st.Audit()
	recordN(t, e, tr, 7, "runbook")
	if n, err := e.rdb.XLen(e.ctx, e.st.b.k.audit()).Result(); err != nil || n != 3 {
		t.Fatalf("trail holds %d entries (%v), want the cap, 3", n, err)
	}
	v, err := tr.Verify(e.ctx)
	if err != nil || v.Break != nil || v.Anchor == "" || v.Entries != 3 {
		t.Fatalf("capped trail: %+v %v, want intact from its anchor", v, err)
	}
	ms := rewriteTrail(t, e, func(ms []redis.XMessage) []redis.XMessage { return ms[1:] })
	verifyBreak(t, e, tr, ms[0].ID, AuditDeleted)
}

// TestAuditRateLimitPerPrincipal: a principal past its entries per minute
// is refused (ErrAuditRateLimited, nothing appended); another principal
// is not, and the next minute the first may add again.
func TestAuditRateLimitPerPrincipal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.AuditRate = 3 })
	tr := e.st.Audit()
	e.clock.Advance(time.Hour - time.Duration(e.clock.Now().UnixNano())%time.Hour) // the start of a minute
	entry := func(p string) audit.Entry {
		return audit.Entry{Principal: p, Identity: "api:" + p, FrontEnd: "api", Op: audit.OpPause, Outcome: audit.OutcomeOK}
	}
	for i := 0; i < 3; i++ {
		if err := tr.Record(e.ctx, entry("flood")); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Writable(e.ctx, "flood"); !errors.Is(err, ErrAuditRateLimited) {
		t.Fatalf("Writable past the rate: %v, want ErrAuditRateLimited", err)
	}
	if err := tr.Writable(e.ctx, "other"); err != nil {
		t.Fatalf("Writable for another principal: %v", err)
	}
	if err := tr.Record(e.ctx, entry("flood")); !errors.Is(err, ErrAuditRateLimited) {
		t.Fatalf("4th entry in a minute: %v, want ErrAuditRateLimited", err)
	}
	if err := tr.Record(e.ctx, entry("other")); err != nil {
		t.Fatalf("another principal: %v", err)
	}
	if n, _ := e.rdb.XLen(e.ctx, e.st.b.k.audit()).Result(); n != 4 {
		t.Fatalf("trail holds %d, want 4", n)
	}
	e.clock.Advance(time.Minute)
	if err := tr.Record(e.ctx, entry("flood")); err != nil {
		t.Fatalf("the next minute: %v", err)
	}
}
