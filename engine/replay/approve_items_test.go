package replay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestApprovalLoadsItemsPastItsFirstWhenItMust: an approval loads only
// the first items of its preview (the ones it owns, Config.Tune.OwnAtApproval)
// unless a step of it needs them all. Replay A is approved for the last
// 100 of a DLQ of 5,000 and paused before it runs, so it owns its first
// ten of them, far past the first chunk of B's preview of the whole DLQ.
// B's approval, beside the live A, reads what A holds per id and must name
// all ten; confirmed, B's run sends the other 4,990 and leaves the ten to
// A, and the consumer gets each of those once.
func TestApprovalLoadsItemsPastItsFirstWhenItMust(t *testing.T) {
	t.Parallel()
	const n, tail, ownAt = 5000, 100, 10
	cfg := fast
	cfg.Tune.OwnAtApproval, cfg.Tune.ListRows = ownAt, n
	e := newEnvOn(t, cfg, testkit.Rabbit3)
	r := e.rabbit
	src, dlq := r.DeadLetteredAs(nil, n, 100)
	all := preview(t, e, engine.Selection{DLQ: dlq})
	if len(all.Messages) != n {
		t.Fatalf("the preview listed %d messages, want all %d", len(all.Messages), n)
	}
	var tailIDs []string
	for _, m := range all.Messages[n-tail:] {
		tailIDs = append(tailIDs, m.ID)
	}
	ctx := context.Background()
	prm := engine.Params{Step: n, Cap: n, Rate: -1, Timeout: 30 * time.Second}
	apA, err := replay.Approve(e.svc, ctx, preview(t, e, engine.Selection{DLQ: dlq, IDs: tailIDs}).Token, "U_A", prm, true)
	if err != nil {
		t.Fatal(err)
	}
	a := apA.Replay.ID
	if _, err := e.svc.Control(ctx, a, engine.ControlPause, "U_A"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.svc.Control(context.Background(), a, engine.ControlCancel, "U_A") })

	pb := preview(t, e, engine.Selection{DLQ: dlq})
	apB, err := replay.Approve(e.svc, ctx, pb.Token, "U_B", prm, false)
	if !errors.Is(err, engine.ErrChanged) {
		t.Fatalf("B's approval beside paused %s: %v, want %v", a, err, engine.ErrChanged)
	}
	held := 0
	for _, c := range apB.Changes {
		if c.Kind == engine.ChangeHeldByReplay && c.Replay == a && c.Owned {
			held += c.Messages
		}
	}
	if held != ownAt {
		t.Fatalf("B's approval shows %d message(s) owned by %s, want the %d it owns: %+v", held, a, ownAt, apB.Changes)
	}

	rec := &recorder{}
	r.Consume(src, rec.handle)
	b := approveRun(t, e, pb.Token, prm, true)
	if b.State != engine.StateFinished || b.Sent != n-ownAt || b.Missing != 0 {
		t.Fatalf("B: %s, sent %d, missing %d: %s; want finished with %d sent", b.State, b.Sent, b.Missing, b.Note, n-ownAt)
	}
	testkit.Eventually(t, time.Minute, "B's copies at the consumer", func() bool { return len(rec.got()) >= n-ownAt })
	got := ids(rec.got())
	if len(got) != n-ownAt {
		t.Errorf("the consumer got %d distinct messages, want %d", len(got), n-ownAt)
	}
	for id, k := range got {
		if k != 1 {
			t.Errorf("%s reached the consumer %d times", id, k)
		}
	}
	if c := r.Count(dlq); c != ownAt {
		t.Errorf("%d message(s) left in the DLQ, want A's %d", c, ownAt)
	}
}
