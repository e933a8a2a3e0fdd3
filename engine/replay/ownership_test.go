package replay_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// newEnvWith is newEnv whose engine dependencies tune can change (a store
// wrapper that injects a fault into one call of the real Redis store).
func newEnvWith(t testing.TB, cfg replay.Config, tune func(*replay.Deps)) *env {
	t.Helper()
	e := newEnv(t, cfg)
	deps := replay.Deps{Broker: e.broker, Mover: e.broker, Counters: e.broker, Tokens: e.store.Tokens(),
		Ledger: e.store.Ledger(), Replays: e.store.Replays(), Leases: e.store.Leases(), Schedule: e.store.Schedule(), Jobs: e.store.Jobs(), Registry: e.store.Workers(), Consumers: testkit.ConsumersOff{}, Watches: testkit.WatchesOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, Claims: testkit.ClaimsOff{}, TapGaps: testkit.TapOff{}}
	tune(&deps)
	svc, err := replay.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	return e
}

// ledgerCount is how many ledger entries replay id has.
func ledgerCount(t *testing.T, e *env, id string) int {
	t.Helper()
	es, err := e.store.Ledger().Entries(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// A job handed out again (an XADD retried after a lost reply, a job
// redelivered after a failed XACK) must not resume a replay that stopped
// by itself, nor one resumed once that stopped again: a worker runs a
// replay only when it is queued or a resume asked for it.
func TestDuplicateJobDoesNotResumeAStoppedReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	r := e.rabbit
	src, dlq := r.DeadLettered(40, 50)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	c := r.Consume(src, func(amqp.Delivery) string { return "reject" }) // every copy comes back
	ctx := context.Background()
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Step: 5, Cap: 5, Rate: -1, Timeout: 10 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	id := ap.Replay.ID
	rep, err := e.svc.Run(ctx, id, "w1")
	if err != nil || rep.State != engine.StateStopped || rep.Sent != 5 {
		t.Fatalf("first run: %v, %s with %d sent: want stopped after 5", err, rep.State, rep.Sent)
	}

	// A stray job for the stopped replay, through a real worker.
	stray := func(stage string, wantSent int) {
		t.Helper()
		_, rejected := c.Counts()
		entries := ledgerCount(t, e, id)
		wctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- e.svc.Work(wctx, engine.WorkerConfig{ID: "w1", Block: 50 * time.Millisecond})
		}()
		for i := 0; i < 2; i++ { // the same job twice
			if err := e.store.Jobs().Enqueue(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		testkit.Eventually(t, 10*time.Second, stage+": the worker to take both jobs", func() bool {
			n, err := e.store.Jobs().Pending(ctx)
			return err == nil && n == 0
		})
		stop()
		<-done
		cur, err := e.svc.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		_, rejectedAfter := c.Counts()
		if cur.State != engine.StateStopped || cur.Sent != wantSent || ledgerCount(t, e, id) != entries || rejectedAfter != rejected {
			t.Fatalf("%s: a stray job ran the replay: %s with %d sent (want stopped, %d), ledger %d → %d, target deliveries %d → %d",
				stage, cur.State, cur.Sent, wantSent, entries, ledgerCount(t, e, id), rejected, rejectedAfter)
		}
	}
	stray("stopped by itself", 5)

	// Resumed deliberately, it runs one more step and stops again; a
	// leftover job of that resume must not run it a third time.
	if _, err := e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER"); err != nil {
		t.Fatal(err)
	}
	rep, err = e.svc.Run(ctx, id, "w1")
	if err != nil || rep.State != engine.StateStopped || rep.Sent != 10 {
		t.Fatalf("resumed run: %v, %s with %d sent: want stopped after 10", err, rep.State, rep.Sent)
	}
	stray("stopped again after a resume", 10)
}

// approvedPaced approves a replay of n dead letters in one step of n at
// rate msg/s, with a consumer on their source that acks and counts what it
// gets, and returns the replay id and that count.
func approvedPaced(t *testing.T, e *env, n int, rate float64) (string, *atomic.Int64) {
	t.Helper()
	src, dlq := e.rabbit.DeadLettered(n, 50)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	delivered := new(atomic.Int64)
	e.rabbit.Consume(src, func(amqp.Delivery) string { delivered.Add(1); return "ack" })
	ap, err := replay.Approve(e.svc, context.Background(), p.Token, "U_APP", engine.Params{Step: n, Cap: n, Rate: rate, Timeout: 20 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	return ap.Replay.ID, delivered
}

// Two runs of one replay in one process are different owners: a run
// whose lease was taken by another run of the same worker stops, and does
// not release the other's lease when it ends.
func TestSecondRunInTheSameProcessIsAnotherOwner(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	id, delivered := approvedPaced(t, e, 100, 40)
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { _, err := e.svc.Run(ctx, id, "w1"); done <- err }()
	testkit.Eventually(t, 10*time.Second, "some sent", func() bool { return delivered.Load() > 0 })

	// The first run's lease lapses and a second run in the same process
	// (worker "w1") takes it.
	held, err := e.store.Leases().Owner(ctx, id)
	if err != nil || held == "" {
		t.Fatalf("lease holder %q: %v", held, err)
	}
	if err := e.store.Leases().Release(ctx, id, held); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := e.store.Leases().Acquire(ctx, id, "w1", time.Minute); err != nil || !ok {
		t.Fatalf("second run's acquire: %v %v", ok, err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, engine.ErrLeaseLost) {
			t.Fatalf("first run ended with %v, want ErrLeaseLost", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the first run did not stop after losing its lease")
	}
	if held, err := e.store.Leases().Owner(ctx, id); err != nil || held != "w1" {
		t.Fatalf("after the first run ended the lease is held by %q (%v): it released the second run's lease", held, err)
	}
}

// hookReplays is the real store with a hook run just before the owner
// writes the replay as paused (by Yield).
type hookReplays struct {
	*store.Replays
	once        sync.Once
	beforePause func()
}

func (h *hookReplays) paused(r engine.Replay) {
	if r.State == engine.StatePaused && h.beforePause != nil {
		h.once.Do(h.beforePause)
	}
}

func (h *hookReplays) Yield(ctx context.Context, r engine.Replay, owner string, epoch int64, desired engine.State, unless ...engine.State) error {
	h.paused(r)
	return h.Replays.Yield(ctx, r, owner, epoch, desired, unless...)
}

// A resume that lands after the owner decided to pause, before it wrote
// the pause, must not leave the replay paused while its requester was
// told it runs: whichever wins, the answer is the truth.
func TestResumeRacingAPauseTellsTheTruth(t *testing.T) {
	t.Parallel()
	hook := &hookReplays{}
	e := newEnvWith(t, fast, func(d *replay.Deps) {
		hook.Replays = d.Replays.(*store.Replays)
		d.Replays = hook
	})
	id, delivered := approvedPaced(t, e, 100, 50)
	ctx := context.Background()
	var told engine.Replay
	var resumeErr error
	hook.beforePause = func() {
		told, resumeErr = e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER")
	}
	done := make(chan engine.Replay, 1)
	go func() { rep, _ := e.svc.Run(ctx, id, "w1"); done <- rep }()
	testkit.Eventually(t, 10*time.Second, "some sent", func() bool { return delivered.Load() > 0 })
	if _, err := e.svc.Control(ctx, id, engine.ControlPause, "U_PAUSER"); err != nil {
		t.Fatal(err)
	}
	rep := <-done
	if resumeErr != nil {
		t.Fatalf("resume: %v", resumeErr)
	}
	t.Logf("resume answered %s; the run ended %s with %d sent", told.State, rep.State, rep.Sent)
	switch told.State {
	case engine.StateRunning:
		// Told it runs: its owner must carry on to the end.
		if rep.State != engine.StateFinished || rep.Sent != 100 {
			t.Fatalf("the resume was answered %q but the run ended %s with %d sent", told.State, rep.State, rep.Sent)
		}
	case engine.StatePaused:
		// Told it is paused (a worker takes it): a job must be waiting.
		if n, _ := e.store.Jobs().Pending(ctx); n == 0 {
			t.Fatal("the resume was answered paused but no job was handed out")
		}
	default:
		t.Fatalf("resume answered %s", told.State)
	}
	testkit.Eventually(t, 20*time.Second, "every copy delivered once", func() bool { return delivered.Load() == int64(rep.Sent) })
}

// A cancel cannot be overridden by a later resume, and a resume of a
// replay whose owner is gone is refused, not answered "running".
func TestResumeAfterCancelIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	r := e.rabbit
	_, dlq := r.DeadLettered(20, 50)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	ctx := context.Background()
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{}, false)
	if err != nil {
		t.Fatal(err)
	}
	id := ap.Replay.ID
	// An owner holds it (no run: a stand-in lease) and it shows running.
	if _, ok, err := e.store.Leases().Acquire(ctx, id, "w1", time.Minute); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := e.store.Replays().Update(ctx, id, func(cur *engine.Replay) error { cur.State = engine.StateRunning; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Control(ctx, id, engine.ControlCancel, "U_CANCEL"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER"); !errors.Is(err, engine.ErrNotControllable) || !strings.Contains(err.Error(), "cancel is pending") {
		t.Fatalf("resume after cancel: %v, want refused (a cancel is pending)", err)
	}
	if want, _, _ := e.store.Replays().Desired(ctx, id); want != engine.StateCancelled {
		t.Fatalf("desired %q after the refused resume, want cancelled", want)
	}
	// The owner is gone: pause and resume are refused, truthfully.
	if err := e.store.Leases().Release(ctx, id, "w1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Control(ctx, id, engine.ControlPause, "U_PAUSER"); !errors.Is(err, engine.ErrNotControllable) || !strings.Contains(err.Error(), "process is gone") {
		t.Fatalf("pause of an ownerless running replay: %v, want refused", err)
	}
}

// A replay left paused by a shutdown is resumed by a person, not by a job
// that happens to be handed out again.
func TestDuplicateJobDoesNotResumeAReplayPausedByShutdown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	id, delivered := approvedPaced(t, e, 60, 30)
	ctx := context.Background()
	rctx, shutdown := context.WithCancel(ctx)
	done := make(chan engine.Replay, 1)
	go func() { rep, _ := e.svc.Run(rctx, id, "w1"); done <- rep }()
	testkit.Eventually(t, 10*time.Second, "some sent", func() bool { return delivered.Load() > 0 })
	shutdown()
	rep := <-done
	if rep.State != engine.StatePaused || rep.Sent == 0 || rep.Sent == 60 {
		t.Fatalf("after the shutdown: %s with %d sent, want paused midway", rep.State, rep.Sent)
	}
	wctx, stop := context.WithCancel(ctx)
	werr := make(chan error, 1)
	go func() {
		werr <- e.svc.Work(wctx, engine.WorkerConfig{ID: "w2", Block: 50 * time.Millisecond})
	}()
	if err := e.store.Jobs().Enqueue(ctx, id); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the worker to take the job", func() bool {
		n, err := e.store.Jobs().Pending(ctx)
		return err == nil && n == 0
	})
	stop()
	<-werr
	cur, err := e.svc.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if cur.State != engine.StatePaused || cur.Sent != rep.Sent || ledgerCount(t, e, id) != rep.Sent {
		t.Fatalf("a stray job ran the replay paused by a shutdown: %s with %d sent (was %d)", cur.State, cur.Sent, rep.Sent)
	}
}
