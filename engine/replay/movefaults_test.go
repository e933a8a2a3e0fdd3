package replay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestUnpacedReplayConnectionLostEnds closes the replaying engine's broker
// connection in the middle of an unpaced (rate=max) replay, while copies
// wait for their confirms, on both brokers, from a classic and a quorum
// DLQ. The run must return promptly (before: it spun forever on the
// closed bounce (basic.return) channel) and stop saying why, with no copy called
// "nacked" — a confirm the closed channel left unanswered is in doubt —
// nothing lost, every copy the target got in the ledger, and a resume
// must not send again anything the ledger lists.
func TestUnpacedReplayConnectionLostEnds(t *testing.T) {
	t.Parallel()
	eachDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		n := 5000
		if raceOn {
			n = 3000 // make test's engine lane (the fault still comes after 300 of them)
		}
		f := newFaultRun(t, on, dlqArgs, n)
		id, rep := f.breakOneStep(t, n, 60*time.Second)
		t.Logf("after the fault: state %s, sent %d, in doubt %d, duplicates %d: %s", rep.State, rep.Sent, rep.InDoubt, rep.Duplicates, rep.Note)
		f.expectStoppedByFault(t, rep)
		f.resumeAfterFault(t, id, f.account(t, "after the fault", id), 60*time.Second)
	})
}

// breakOneStep approves f's preview as one unpaced step of n, runs it, and
// closes the engine's broker connection once 300 copies were delivered:
// it returns the replay's id and the replay as the run ended (within
// wait), failing the test if the fault came after the replay finished.
func (f *faultRun) breakOneStep(t *testing.T, n int, wait time.Duration) (string, engine.Replay) {
	t.Helper()
	e := f.e
	ctx := context.Background()
	ap, err := replay.Approve(e.svc, ctx, f.p.Token, "U_APP", engine.Params{Step: n, Cap: n, Rate: -1, Timeout: 20 * time.Second}, true)
	if err != nil {
		t.Fatal(err)
	}
	names := f.connNames(t)
	done := make(chan engine.Replay, 1)
	go func() { rep, _ := e.svc.Run(ctx, ap.Replay.ID, "owner"); done <- rep }()
	testkit.Eventually(t, 30*time.Second, "300 delivered", func() bool { return len(f.rec.got()) >= 300 })
	if f.cut(t, names) == 0 {
		t.Fatal("no connection of the replaying engine found to close")
	}
	var rep engine.Replay
	select {
	case rep = <-done:
	case <-time.After(wait):
		t.Fatalf("the replay did not end within %s of its connection closing", wait)
	}
	if rep.State == engine.StateFinished {
		t.Fatal("the fault came too late: the replay finished")
	}
	return ap.Replay.ID, rep
}

// resumeAfterFault resumes replay id after a fault (dups: what account
// found then) and runs it to its end within wait: nothing the ledger lists
// is sent again, and it ends finished, or stopped by copies in doubt. It
// returns the replay as it ended.
func (f *faultRun) resumeAfterFault(t *testing.T, id string, dups map[string]int, wait time.Duration) engine.Replay {
	t.Helper()
	e := f.e
	ctx := context.Background()
	if _, err := e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER"); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	rep, err := e.svc.Run(rctx, id, "owner2")
	if err != nil {
		t.Fatalf("resumed replay: %v", err)
	}
	f.expectNoResend(t, dups, f.account(t, "after resuming", id))
	t.Logf("resumed: state %s, sent %d of %d, in doubt %d: %s", rep.State, rep.Sent, rep.Total, rep.InDoubt, rep.Note)
	if rep.State == engine.StateStopped && rep.InDoubt == 0 && rep.Duplicates > 0 && rep.Sent == rep.Total {
		// Its last read could not reach every original of a confirmed copy
		// (under load a read can end short) and it said so rather than
		// "finished": the next resume acks them, sending nothing.
		if !strings.Contains(rep.Note, "a resume acks them") {
			t.Fatalf("stopped with %d duplicate(s) left without saying how they go: %s", rep.Duplicates, rep.Note)
		}
		if _, err := e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER"); err != nil {
			t.Fatal(err)
		}
		if rep, err = e.svc.Run(rctx, id, "owner3"); err != nil {
			t.Fatalf("replay resumed again: %v", err)
		}
		f.expectNoResend(t, dups, f.account(t, "after resuming again", id))
		t.Logf("resumed again: state %s, sent %d of %d, in doubt %d, duplicates %d: %s", rep.State, rep.Sent, rep.Total, rep.InDoubt, rep.Duplicates, rep.Note)
	}
	if rep.InDoubt > 0 && rep.State == engine.StateFinished {
		t.Errorf("a replay with %d copies in doubt ended finished", rep.InDoubt)
	}
	if rep.State != engine.StateFinished && !(rep.State == engine.StateStopped && rep.InDoubt > 0) {
		t.Errorf("resumed replay %s with %d in doubt: %s; want finished, or stopped by copies in doubt", rep.State, rep.InDoubt, rep.Note)
	}
	return rep
}
