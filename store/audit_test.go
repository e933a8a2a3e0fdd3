package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/stroma/dlqbot/audit"
)

// TestAuditAppendList appends entries through two front ends and lists
// them with each filter: oldest first, exactly the ones selected, ids in
// time order, continuing after an id, and an entry without its caller
// refused (nothing appended).
func TestAuditAppendList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tr := e.st.Audit()
	if got, err := tr.List(e.ctx, audit.Filter{}); err != nil || len(got) != 0 {
		t.Fatalf("empty trail: %v, %v", got, err)
	}
	t0 := e.clock.Now()
	entries := []audit.Entry{
		{Principal: "runbook", Identity: "api:runbook", FrontEnd: "api", Op: audit.OpPreview, Outcome: audit.OutcomeOK, DLQ: "orders.dlq", TokenRef: audit.TokenRef("p_1"), Messages: 5},
		{Principal: "U0ALICE", Identity: "U0ALICE", FrontEnd: "slack", Op: audit.OpApprove, Outcome: audit.OutcomeOK, DLQ: "orders.dlq", ReplayID: "r_1"},
		{Principal: "viewer", Identity: "api:viewer", FrontEnd: "dashboard", Op: audit.OpPause, Outcome: audit.OutcomeRefused, Code: "forbidden", DLQ: "orders.dlq", ReplayID: "r_1"},
		{Principal: "runbook", Identity: "api:runbook", FrontEnd: "api", Op: audit.OpPause, Outcome: audit.OutcomeOK, DLQ: "orders.dlq", ReplayID: "r_1"},
		{Principal: "runbook", Identity: "api:runbook", FrontEnd: "api", Op: audit.OpCheck, Outcome: audit.OutcomeOK, DLQ: "payments.dlq", ReplayID: "r_2"},
	}
	var ids []string
	for i := range entries {
		if i != 3 { // entries 2 and 3 share a millisecond: they keep their order too
			e.clock.Advance(time.Minute)
		}
		if err := tr.Record(e.ctx, entries[i]); err != nil {
			t.Fatal(err)
		}
	}
	all, err := tr.List(e.ctx, audit.Filter{})
	if err != nil || len(all) != len(entries) {
		t.Fatalf("list all = %d entries, %v", len(all), err)
	}
	for i, got := range all {
		want := entries[i]
		if got.Op != want.Op || got.Principal != want.Principal || got.Outcome != want.Outcome || got.ID == "" || got.Time.IsZero() {
			t.Errorf("entry %d = %+v, want %+v", i, got, want)
		}
		if i > 0 && compareStreamIDs(all[i-1].ID, got.ID) >= 0 {
			t.Errorf("ids out of order: %s then %s", all[i-1].ID, got.ID)
		}
		ids = append(ids, got.ID)
	}
	if all[0].TokenRef != audit.TokenRef("p_1") || all[0].Messages != 5 || all[2].Code != "forbidden" {
		t.Errorf("fields lost: %+v, %+v", all[0], all[2])
	}
	count := func(f audit.Filter) []string {
		t.Helper()
		got, err := tr.List(e.ctx, f)
		if err != nil {
			t.Fatalf("list %+v: %v", f, err)
		}
		var out []string
		for _, g := range got {
			out = append(out, g.ID)
		}
		return out
	}
	for name, c := range map[string]struct {
		f    audit.Filter
		want []string
	}{
		"principal":        {audit.Filter{Principal: "runbook"}, []string{ids[0], ids[3], ids[4]}},
		"identity":         {audit.Filter{Principal: "api:viewer"}, []string{ids[2]}},
		"front end":        {audit.Filter{FrontEnd: "slack"}, []string{ids[1]}},
		"op":               {audit.Filter{Op: audit.OpPause}, []string{ids[2], ids[3]}},
		"outcome":          {audit.Filter{Outcome: audit.OutcomeRefused}, []string{ids[2]}},
		"dlq":              {audit.Filter{DLQ: "payments.dlq"}, []string{ids[4]}},
		"replay":           {audit.Filter{ReplayID: "r_1"}, []string{ids[1], ids[2], ids[3]}},
		"since":            {audit.Filter{Since: t0.Add(2 * time.Minute)}, []string{ids[1], ids[2], ids[3], ids[4]}},
		"until":            {audit.Filter{Until: t0.Add(2 * time.Minute)}, []string{ids[0]}},
		"after":            {audit.Filter{After: ids[2]}, []string{ids[3], ids[4]}},
		"after and op":     {audit.Filter{After: ids[2], Op: audit.OpPause}, []string{ids[3]}},
		"limit":            {audit.Filter{Limit: 2}, []string{ids[0], ids[1]}},
		"limit and filter": {audit.Filter{Principal: "runbook", Limit: 2}, []string{ids[0], ids[3]}},
		"nothing":          {audit.Filter{Op: audit.OpResend}, nil},
	} {
		if got := count(c.f); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: got %v, want %v", name, got, c.want)
		}
	}
	if _, err := tr.List(e.ctx, audit.Filter{After: "not-an-id"}); err == nil {
		t.Error("a bad After id was accepted")
	}
	if _, err := tr.List(e.ctx, audit.Filter{Limit: MaxAuditList + 1}); err == nil {
		t.Error("a limit over the maximum was accepted")
	}
	if err := tr.Record(e.ctx, audit.Entry{Op: audit.OpPause, Outcome: audit.OutcomeOK}); err == nil {
		t.Error("an entry without a caller was appended")
	}
	if n := e.rdb.XLen(e.ctx, e.st.b.k.audit()).Val(); n != int64(len(entries)) {
		t.Errorf("the trail holds %d entries, want %d", n, len(entries))
	}
}

// TestAuditRetention: with the store clock moved past the retention, an
// append trims the older entries from the stream itself (not only from
// listings), and a clock that stepped back never reorders the trail.
func TestAuditRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.AuditRetention = time.Hour })
	tr := e.st.Audit()
	rec := func(op string) {
		t.Helper()
		if err := tr.Record(e.ctx, audit.Entry{Identity: "api:runbook", Principal: "runbook", FrontEnd: "api", Op: op, Outcome: audit.OutcomeOK}); err != nil {
			t.Fatal(err)
		}
	}
	rec(audit.OpPreview)
	e.clock.Advance(30 * time.Minute)
	rec(audit.OpApprove)
	e.clock.Advance(45 * time.Minute) // the preview is now 75 minutes old
	got, err := tr.List(e.ctx, audit.Filter{})
	if err != nil || len(got) != 1 || got[0].Op != audit.OpApprove {
		t.Fatalf("past the retention, before any append: %+v, %v", got, err)
	}
	if n := e.rdb.XLen(e.ctx, e.st.b.k.audit()).Val(); n != 2 {
		t.Fatalf("no append yet, the stream holds %d, want 2", n)
	}
	rec(audit.OpPause)
	if n := e.rdb.XLen(e.ctx, e.st.b.k.audit()).Val(); n != 2 {
		t.Errorf("after an append the stream holds %d entries, want 2 (the preview trimmed)", n)
	}
	e.clock.Advance(-10 * time.Minute)
	rec(audit.OpCancel)
	got, err = tr.List(e.ctx, audit.Filter{})
	if err != nil || len(got) != 3 || got[1].Op != audit.OpPause || got[2].Op != audit.OpCancel {
		t.Fatalf("after a clock step back: %+v, %v", got, err)
	}
	if compareStreamIDs(got[1].ID, got[2].ID) >= 0 {
		t.Errorf("ids out of order: %s, %s", got[1].ID, got[2].ID)
	}
	// The trimmed trail still verifies, from the anchor the trim kept.
	if v, err := tr.Verify(e.ctx); err != nil || v.Break != nil || v.Anchor == "" || v.Entries != 3 {
		t.Errorf("verify after the retention trimmed: %+v %v", v, err)
	}

	d := newEnv(t)
	if d.st.b.cfg.AuditRetention != DefaultAuditRetention || DefaultAuditRetention != 90*24*time.Hour {
		t.Errorf("default retention %s", d.st.b.cfg.AuditRetention)
	}
	if _, err := New(Config{AuditRetention: time.Millisecond}, d.rdb, nil); err == nil {
		t.Error("a retention under a second was accepted")
	}
}
