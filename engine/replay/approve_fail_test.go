package replay_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// failingReplays is the real store whose next Create fails.
type failingReplays struct {
	*store.Replays
	failCreate atomic.Int32
}

func (f *failingReplays) Create(ctx context.Context, r engine.Replay) error {
	if f.failCreate.Add(-1) >= 0 {
		return errors.New("injected: create failed")
	}
	return f.Replays.Create(ctx, r)
}

// failingTokens is the real store whose next Retain fails.
type failingTokens struct {
	*store.Tokens
	failRetain atomic.Int32
}

func (f *failingTokens) Retain(ctx context.Context, token string, d time.Duration) error {
	if f.failRetain.Add(-1) >= 0 {
		return errors.New("injected: retain failed")
	}
	return f.Tokens.Retain(ctx, token, d)
}

// A write that fails right after the token was consumed (creating the
// replay, keeping its preview) must be seen by the approver, leave no
// replay that could run, and leave the token approvable again.
func TestApprovalThatFailsAfterConsumingCanBeRetried(t *testing.T) {
	t.Parallel()
	fr, ft := &failingReplays{}, &failingTokens{}
	e := newEnvWith(t, fast, func(d *replay.Deps) {
		fr.Replays, ft.Tokens = d.Replays.(*store.Replays), d.Tokens.(*store.Tokens)
		d.Replays, d.Tokens = fr, ft
	})
	r := e.rabbit
	ctx := context.Background()
	for _, fault := range []string{"create", "retain"} {
		src, dlq := r.DeadLettered(10, 50)
		rec := &recorder{}
		r.Consume(src, rec.handle)
		p := preview(t, e, engine.Selection{DLQ: dlq})
		if fault == "create" {
			fr.failCreate.Store(1)
		} else {
			ft.failRetain.Store(1)
		}
		if _, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", oneStep, false); !errors.Is(err, engine.ErrApprovalFailed) {
			t.Fatalf("%s fault: approve returned %v, want ErrApprovalFailed", fault, err)
		}
		if by, err := e.store.Tokens().UsedBy(ctx, p.Token); err != nil || by != "" {
			t.Fatalf("%s fault: token used by %q (%v): want it released", fault, by, err)
		}
		all, err := e.store.Replays().List(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range all {
			if x.Token == p.Token && x.State != engine.StateCancelled {
				t.Fatalf("%s fault: the failed approval left replay %s %s", fault, x.ID, x.State)
			}
		}
		rep := approveRun(t, e, p.Token, oneStep, false) // approved again: it runs
		if rep.State != engine.StateFinished || rep.Sent != 10 {
			t.Fatalf("%s fault: the second approval's replay %s with %d sent", fault, rep.State, rep.Sent)
		}
		// A failed create left no record: the retry takes the token's
		// first id; a withdrawn record keeps it, so the retry takes the next.
		want := engine.TokenReplayID(p.Token, 0)
		if fault == "retain" {
			want = engine.TokenReplayID(p.Token, 1)
			if w, err := e.store.Replays().Get(ctx, engine.TokenReplayID(p.Token, 0)); err != nil || !w.Withdrawn {
				t.Fatalf("retain fault: the withdrawn replay %+v (%v), want it marked withdrawn", w, err)
			}
		}
		if rep.ID != want {
			t.Fatalf("%s fault: the retried approval's replay %s, want %s", fault, rep.ID, want)
		}
		testkit.Eventually(t, 20*time.Second, "10 delivered", func() bool { return len(rec.got()) == 10 })
		if n := r.Count(dlq); n != 0 {
			t.Fatalf("%s fault: %d left in the DLQ", fault, n)
		}
	}
}
