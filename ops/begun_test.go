package ops_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
	"github.com/stroma/dlqbot/store"
)

// begunRefusingTrail takes every entry but a begun one: a trail that
// fails at the moment an operation is about to take effect.
type begunRefusingTrail struct{ testkit.Trail }

func (b *begunRefusingTrail) Record(ctx context.Context, e audit.Entry) error {
	if e.Outcome == audit.OutcomeBegun {
		return errors.New("redis: connection refused")
	}
	return b.Trail.Record(ctx, e)
}

// TestNoEffectWithoutItsBegunEntry: when the begun entry cannot be
// written, approve, resume, cancel, park and discard are refused
// unavailable and the engine is asked for nothing, each outcome recorded
// as refused unavailable; pause, the brake, still goes through.
func TestNoEffectWithoutItsBegunEntry(t *testing.T) {
	t.Parallel()
	p, err := commands.ParsePolicy([]byte(policy))
	if err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, tr := &parkCounting{fakeEngine: &fakeEngine{}}, &begunRefusingTrail{}
	o, err := ops.New(ops.Config{Policy: p}, ops.Deps{Engine: f, Tokens: f, Replays: f, Windows: st.Windows(), Audit: tr})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	alice := ops.SlackCaller("U0ALICE001")
	for name, err := range map[string]error{
		"approve": err2(o.Approve(ctx, alice, ops.Approval{Token: "p_U0OTHER001"})),
		"resume":  err2(o.Control(ctx, alice, engine.ControlResume, "r_1")),
		"cancel":  err2(o.Control(ctx, alice, engine.ControlCancel, "r_1")),
		"park":    err2(o.Park(ctx, alice, "r_1")),
		"discard": err2(o.Discard(ctx, alice, "p_U0OTHER001")),
	} {
		if got := code(err); got != ops.Unavailable {
			t.Errorf("%s: %s, want unavailable", name, got)
		}
	}
	if n := f.changes(); n != 0 {
		t.Fatalf("the engine was asked to change %d thing(s): %v %v %v", n, f.approved, f.controls, f.parked)
	}
	if es := tr.Find("", "", audit.OutcomeRefused); len(es) != 5 || es[0].Code != string(ops.Unavailable) {
		t.Errorf("outcomes recorded: %+v, want 5 refused unavailable", es)
	}
	if _, err := o.Control(ctx, alice, engine.ControlPause, "r_1"); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if len(f.controls) != 1 {
		t.Errorf("the pause did not reach the engine: %v", f.controls)
	}
}
