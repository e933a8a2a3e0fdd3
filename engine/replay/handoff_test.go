package replay_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// An engine built without Deps.Jobs (the terminal's) records a resume but
// hands nothing out, so that its caller runs the replay; one with Jobs
// hands the resumed replay to the workers. Without Jobs and Registry, Work
// and Enqueue refuse at once, naming what is missing.
func TestResumeHandsOutOnlyWithJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	_, dlq := e.rabbit.DeadLettered(3, 20)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	ctx := context.Background()
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{}, false)
	if err != nil {
		t.Fatal(err)
	}
	id := ap.Replay.ID
	stop := func() {
		t.Helper()
		if err := e.store.Replays().Update(ctx, id, func(cur *engine.Replay) error { cur.State = engine.StateStopped; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	pending := func() int64 {
		t.Helper()
		n, err := e.store.Jobs().Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The terminal's engine on the same broker and store, without the job
	// queue and the worker registry.
	term, err := replay.New(fast, replay.Deps{Broker: e.broker, Mover: e.broker, Tokens: e.store.Tokens(),
		Ledger: e.store.Ledger(), Replays: e.store.Replays(), Leases: e.store.Leases(), Schedule: e.store.Schedule(), Counters: testkit.CountersOff{}, Consumers: testkit.ConsumersOff{}, Watches: testkit.WatchesOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, Claims: testkit.ClaimsOff{}, TapGaps: testkit.TapOff{}})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if r, err := term.Control(ctx, id, engine.ControlResume, "U_RESUMER"); err != nil || r.State != engine.StateStopped {
		t.Fatalf("resume without jobs: %v, %s: want recorded, still stopped", err, r.State)
	}
	if want, _, _ := e.store.Replays().Desired(ctx, id); want != engine.StateRunning {
		t.Fatalf("desired %q after the resume without jobs, want running", want)
	}
	if n := pending(); n != 0 {
		t.Fatalf("%d jobs after a resume without jobs, want none", n)
	}
	if err := term.Work(ctx, engine.WorkerConfig{}); err == nil || !strings.Contains(err.Error(), "Deps.Jobs") {
		t.Fatalf("work without jobs: %v, want an error naming Deps.Jobs", err)
	}
	if err := term.Enqueue(ctx, id); err == nil || !strings.Contains(err.Error(), "Deps.Jobs") {
		t.Fatalf("enqueue without jobs: %v, want an error naming Deps.Jobs", err)
	}

	if r, err := e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER"); err != nil || r.State != engine.StateStopped {
		t.Fatalf("resume with jobs: %v, %s", err, r.State)
	}
	if n := pending(); n != 1 {
		t.Fatalf("%d jobs after a resume with jobs, want 1", n)
	}
	if err := e.svc.Enqueue(ctx, id); err != nil {
		t.Fatal(err)
	}
	if n := pending(); n != 2 {
		t.Fatalf("%d jobs after Enqueue, want 2", n)
	}
}
