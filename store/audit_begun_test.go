package store

import (
	"slices"
	"testing"

	"github.com/stroma/dlqbot/audit"
)

// TestAuditBegunListedOnlyWithoutOutcome: an operation's begun entry is
// hidden from a listing once its outcome follows (an approval's outcome
// naming the replay it created concludes a begun entry naming none), and
// shown when no outcome followed; two identical operations begun at once
// are concluded one each; outcome=begun lists every begun entry; a page
// of hidden entries does not end the listing early; and the chain with
// begun entries still verifies.
func TestAuditBegunListedOnlyWithoutOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tr := e.st.Audit()
	alice := audit.Entry{Principal: "alice", Identity: "U0ALICE", FrontEnd: "slack", DLQ: "orders.dlq"}
	with := func(op, outcome, replay, token string) audit.Entry {
		x := alice
		x.Op, x.Outcome, x.ReplayID, x.TokenRef = op, outcome, replay, token
		return x
	}
	for _, x := range []audit.Entry{
		with(audit.OpApprove, audit.OutcomeBegun, "", "t_1"),
		with(audit.OpApprove, audit.OutcomeOK, "r_1", "t_1"),
		with(audit.OpCancel, audit.OutcomeBegun, "r_1", "t_1"), // never concluded
		with(audit.OpPause, audit.OutcomeBegun, "r_2", ""),
		with(audit.OpPause, audit.OutcomeBegun, "r_2", ""),
		with(audit.OpCancel, audit.OutcomeOK, "r_2", ""), // another operation: concludes neither pause
		with(audit.OpPause, audit.OutcomeOK, "r_2", ""),
		with(audit.OpPause, audit.OutcomeFailed, "r_2", ""),
	} {
		if err := tr.Record(e.ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	list := func(f audit.Filter) []string {
		t.Helper()
		got, err := tr.List(e.ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, g := range got {
			out = append(out, g.Op+" "+g.Outcome)
		}
		return out
	}
	want := []string{"approve ok", "cancel begun", "cancel ok", "pause ok", "pause failed"}
	if got := list(audit.Filter{}); !slices.Equal(got, want) {
		t.Errorf("listing %q, want %q", got, want)
	}
	if got := list(audit.Filter{Outcome: audit.OutcomeBegun}); len(got) != 4 {
		t.Errorf("outcome=begun lists %q, want the 4 begun entries", got)
	}
	if got := list(audit.Filter{Limit: 2}); !slices.Equal(got, want[:2]) {
		t.Errorf("limit 2: %q, want %q", got, want[:2])
	}
	// Past a batch of concluded begun entries the listing goes on.
	for range 270 { // 548 entries in all: under the rate of 600, past one read of 500
		for _, o := range []string{audit.OutcomeBegun, audit.OutcomeOK} {
			if err := tr.Record(e.ctx, with(audit.OpPark, o, "r_3", "")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := list(audit.Filter{Op: audit.OpPark, Limit: 270}); len(got) != 270 || got[269] != "park ok" {
		t.Errorf("270 parks listed as %d entries", len(got))
	}
	if v, err := tr.Verify(e.ctx); err != nil || v.Break != nil || v.Entries != 548 {
		t.Errorf("verify: %+v %v", v, err)
	}
}
