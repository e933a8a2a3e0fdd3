package replay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	dlqamqp "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// newKeepingEnv is newEnvOn whose approvals keep their reads, as the
// terminal's (Tune.KeepReads): the engine's Broker is the amqp one itself
// (engine.ReadKeeper), not the scan counter the other tests wrap it in.
func newKeepingEnv(t *testing.T, on testkit.Broker) *env {
	t.Helper()
	cfg := fast
	cfg.Tune.KeepReads = true
	return newEnvTuned(t, cfg, on, func(d *replay.Deps) { d.Broker = d.Mover.(*dlqamqp.Broker) })
}

// fillFrom fills dlq with n dead letters of work, m-0 … m-<n−1>, 1 KB each.
func fillFrom(r *testkit.Rabbit, dlq, work string, n int) {
	died := time.Now().Add(-time.Hour).Truncate(time.Second)
	msgs := make([]amqp.Publishing, n)
	for i := range msgs {
		msgs[i] = testkit.Msg(fmt.Sprintf("m-%d", i), testkit.Body(i, 1024), testkit.DeathHeaders(work, died))
	}
	r.Publish(dlq, msgs...)
	r.WaitCount(dlq, n, time.Minute)
}

// keptDLQ is a DLQ of n dead letters of work on on (dlqArgs: its
// arguments), beside an engine whose approvals may keep their reads.
func keptDLQ(t *testing.T, on testkit.Broker, dlqArgs amqp.Table, n int) (e *env, work, dlq string) {
	t.Helper()
	e = newKeepingEnv(t, on)
	work, dlq = testkit.Name("work"), testkit.Name("dlq")
	e.rabbit.Topology(work, dlq, dlqArgs)
	fillFrom(e.rabbit, dlq, work, n)
	return e, work, dlq
}

// previewApprove previews the whole of dlq (n messages), waits for the
// preview's give-backs and approves it unpaced, comparing.
func previewApprove(t *testing.T, e *env, dlq string, n int) engine.Approval {
	t.Helper()
	return previewApproveWith(t, e, dlq, n, engine.Params{Rate: -1})
}

// previewApproveWith is previewApprove with the replay's parameters prm.
func previewApproveWith(t *testing.T, e *env, dlq string, n int, prm engine.Params) engine.Approval {
	t.Helper()
	ctx := context.Background()
	p, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U_REQ")
	if err != nil || p.Selected != n {
		t.Fatalf("preview: %v, %d selected: want %d", err, p.Selected, n)
	}
	testkit.Eventually(t, time.Minute, "the preview's give-backs in the DLQ", func() bool { return e.rabbit.Count(dlq) == n })
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", prm, false)
	if err != nil {
		t.Fatalf("approve: %v (changes %+v)", err, ap.Changes)
	}
	return ap
}

// TestTheRunSendsFromItsApprovalsRead replays the whole of a DLQ fed
// through the default exchange, of fewer messages than an approval proves
// from the broker's counts (Tune.ProofFrom), so the approval compares the
// DLQ with the preview by reading it. On a classic DLQ the approval keeps
// that read (engine.ReadKeeper) and the run's cursor begins from it:
//   - right after the approval the DLQ holds nothing ready (the read holds
//     every message, so nothing the approval compared can change);
//   - the run receives not one delivery from the DLQ: the broker delivered
//     each message to dlqbot twice in all, once to the preview and once to
//     the approval;
//   - the replay finishes with every message at the consumer once and the
//     DLQ empty, with no consumer left on it.
//
// On a quorum DLQ (no cursor without a tap: each give-back would spend a
// delivery attempt) the approval gives its read back: the DLQ holds every
// message again, and the run reads it as before.
func TestTheRunSendsFromItsApprovalsRead(t *testing.T) {
	t.Parallel()
	eachKind(t, func(t *testing.T, on testkit.Broker, args amqp.Table) {
		const n = 300
		ctx := context.Background()
		e, work, dlq := keptDLQ(t, on, args, n)
		r := e.rabbit
		got := &tailConsumer{acked: map[string]int{}, rejected: map[string]int{}, reject: func(string) bool { return false }}
		r.Consume(work, got.handle)
		d0 := e.broker.Delivered(dlq)
		ap := previewApprove(t, e, dlq, n)
		quorum := args["x-queue-type"] == "quorum"
		if read := e.broker.Delivered(dlq) - d0; read != 2*n {
			t.Fatalf("the preview and the approval took %d deliveries from the DLQ of %d: want %d (each read once)", read, n, 2*n)
		}
		if quorum {
			testkit.Eventually(t, time.Minute, "the approval's read given back", func() bool {
				ready, consumers := r.Look(dlq)
				return ready == n && consumers == 0
			})
		} else if ready, _ := r.Look(dlq); ready != 0 {
			t.Fatalf("right after the approval the DLQ holds %d ready: want 0, every message held by the approval's read", ready)
		}
		rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner")
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if rep.State != engine.StateFinished || rep.Sent != n {
			t.Fatalf("replay %s, %d sent of %d: %s", rep.State, rep.Sent, n, rep.Note)
		}
		delivered := e.broker.Delivered(dlq) - d0
		t.Logf("%s: finished in %d step(s), %d deliveries from the DLQ of %d (%.2f×)", on.Name, rep.Step, delivered, n, float64(delivered)/n)
		if !quorum && delivered != 2*n {
			t.Fatalf("the run took %d deliveries from the DLQ of %d after its approval's read: want none", delivered-2*n, n)
		}
		eachOnceAndEmpty(t, r, got, dlq, n)
	})
}

// TestAKeptReadNoRunTakesIsGivenBack approves replays whose approvals
// kept their reads (a classic DLQ, compared) and that no run here takes:
// one handed to the workers instead (Service.DropKept, as the terminal
// does when workers run), one paused and one cancelled before it ran.
// Each read is given back at once: the DLQ holds every message again (in
// its order: engine/amqp's TestAKeptReadIsGivenBackInOrder), with no
// consumer on it. The replay handed on, and the paused one once resumed,
// then run (as a worker would) and finish.
func TestAKeptReadNoRunTakesIsGivenBack(t *testing.T) {
	t.Parallel()
	on := testkit.Brokers()[0]
	on.Require(t)
	for _, how := range []string{"handed to the workers", "paused", "cancelled"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			const n = 50
			ctx := context.Background()
			e, work, dlq := keptDLQ(t, on, nil, n)
			r := e.rabbit
			ap := previewApprove(t, e, dlq, n)
			if ready, _ := r.Look(dlq); ready != 0 {
				t.Fatalf("right after the approval the DLQ holds %d ready: want 0 (the approval's read kept)", ready)
			}
			switch how {
			case "cancelled":
				if rep, err := e.svc.Control(ctx, ap.Replay.ID, engine.ControlCancel, "U_APP"); err != nil || rep.State != engine.StateCancelled {
					t.Fatalf("cancel: %v, %s", err, rep.State)
				}
			case "paused":
				// Asked before any run: the run that takes the replay pauses it.
				if _, err := e.svc.Control(ctx, ap.Replay.ID, engine.ControlPause, "U_APP"); err != nil {
					t.Fatalf("pause: %v", err)
				}
			default:
				e.svc.DropKept(ap.Replay.ID)
			}
			if ready, consumers := r.Look(dlq); ready != n || consumers != 0 {
				t.Fatalf("right after the replay was %s the DLQ holds %d ready with %d consumer(s): want all %d back, no consumer", how, ready, consumers, n)
			}
			if how == "cancelled" {
				return
			}
			if how == "paused" {
				if rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner"); err != nil || rep.State != engine.StatePaused || rep.Sent != 0 {
					t.Fatalf("the paused replay's run: %v: %s, %d sent: want paused at once, none sent", err, rep.State, rep.Sent)
				}
				if rep, err := e.svc.Control(ctx, ap.Replay.ID, engine.ControlResume, "U_APP"); err != nil {
					t.Fatalf("resume: %v, %s", err, rep.State)
				}
			}
			got := &tailConsumer{acked: map[string]int{}, rejected: map[string]int{}, reject: func(string) bool { return false }}
			r.Consume(work, got.handle)
			rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner")
			if err != nil || rep.State != engine.StateFinished || rep.Sent != n {
				t.Fatalf("run: %v: %s, %d sent of %d: %s", err, rep.State, rep.Sent, n, rep.Note)
			}
			testkit.Eventually(t, 30*time.Second, "every copy at the consumer", func() bool {
				a, _ := got.counts()
				return a == n
			})
		})
	}
}

// TestASecondApprovalBesideAKeptRead approves two previews of the whole of
// one classic DLQ, the second while the first approval's read is kept for
// its run (the DLQ then shows one consumer and nothing ready). The second
// approval's compare waits for the DLQ's other reader to let go, as for
// any reader; the kept read is given back when its time is up (the run
// had not begun), the compare reads the whole DLQ, and the approval is
// refused, naming the first replay, which owns every previewed message
// (held_by_replay), its own read given back. The first replay then runs,
// reading the DLQ afresh, and the broker ends with every message at the
// consumer exactly once and the DLQ empty, with no consumer on it.
func TestASecondApprovalBesideAKeptRead(t *testing.T) {
	t.Parallel()
	testkit.EachBrokerIn(t, testkit.Brokers(), func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		secondApprovalBesideAKeptRead(t, on)
	})
}

// secondApprovalBesideAKeptRead is TestASecondApprovalBesideAKeptRead on
// one broker.
func secondApprovalBesideAKeptRead(t *testing.T, on testkit.Broker) {
	const n = 200
	ctx := context.Background()
	e, work, dlq := keptDLQ(t, on, nil, n)
	r := e.rabbit
	p1, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U_REQ")
	if err != nil || p1.Selected != n {
		t.Fatalf("first preview: %v, %d selected", err, p1.Selected)
	}
	testkit.Eventually(t, time.Minute, "the first preview's give-backs", func() bool { return r.Count(dlq) == n })
	p2, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U_REQ2")
	if err != nil || p2.Selected != n {
		t.Fatalf("second preview: %v, %d selected", err, p2.Selected)
	}
	testkit.Eventually(t, time.Minute, "the second preview's give-backs", func() bool { return r.Count(dlq) == n })
	ap1, err := replay.Approve(e.svc, ctx, p1.Token, "U_APP", engine.Params{Rate: -1}, false)
	if err != nil {
		t.Fatalf("first approval: %v (changes %+v)", err, ap1.Changes)
	}
	if ready, consumers := r.Look(dlq); ready != 0 || consumers != 1 {
		t.Fatalf("after the first approval the DLQ holds %d ready with %d consumer(s): want 0 and 1 (its read kept)", ready, consumers)
	}
	d0 := e.broker.Delivered(dlq)
	ap2, err := replay.Approve(e.svc, ctx, p2.Token, "U_APP2", engine.Params{Rate: -1}, false)
	if err == nil || ap2.Replay.ID != "" || len(ap2.Changes) != 1 || ap2.Changes[0].Kind != engine.ChangeHeldByReplay ||
		ap2.Changes[0].Replay != ap1.Replay.ID || ap2.Changes[0].Messages != n {
		t.Fatalf("second approval: %v, replay %q, changes %+v: want refused, all %d held by %s", err, ap2.Replay.ID, ap2.Changes, n, ap1.Replay.ID)
	}
	if ready, consumers := r.Look(dlq); ready != n || consumers != 0 {
		t.Fatalf("after the second approval the DLQ holds %d ready with %d consumer(s): want all %d, both reads given back", ready, consumers, n)
	}
	got := &tailConsumer{acked: map[string]int{}, rejected: map[string]int{}, reject: func(string) bool { return false }}
	r.Consume(work, got.handle)
	rep, err := e.svc.Run(ctx, ap1.Replay.ID, "owner")
	if err != nil || rep.State != engine.StateFinished || rep.Sent != n {
		t.Fatalf("run: %v: %s, %d sent of %d: %s", err, rep.State, rep.Sent, n, rep.Note)
	}
	if read := e.broker.Delivered(dlq) - d0; read != 2*n {
		t.Fatalf("the second approval and the run took %d deliveries from the DLQ of %d: want %d, a read each", read, n, 2*n)
	}
	eachOnceAndEmpty(t, r, got, dlq, n)
}

// eachOnceAndEmpty waits until got has every one of n copies, checks each
// reached it once, and waits until dlq is empty with no consumer on it.
func eachOnceAndEmpty(t *testing.T, r *testkit.Rabbit, got *tailConsumer, dlq string, n int) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, "every copy at the consumer", func() bool {
		a, _ := got.counts()
		return a == n
	})
	for id, k := range got.acked {
		if k != 1 {
			t.Fatalf("%s reached the consumer %d times", id, k)
		}
	}
	testkit.Eventually(t, time.Minute, "the DLQ empty, no consumer on it", func() bool {
		ready, consumers := r.Look(dlq)
		return ready == 0 && consumers == 0
	})
}
