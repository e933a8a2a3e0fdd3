package engine_test

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
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
			n = 3000 // make test's engine lane (the fault still comes after 500 of them)
		}
		f := newFaultRun(t, on, dlqArgs, n)
		e := f.e
		ctx := context.Background()
		ap, err := e.svc.Approve(ctx, f.p.Token, "U_APP", engine.Params{Step: n, Cap: n, Rate: -1, Timeout: 20 * time.Second}, true)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan engine.Replay, 1)
		go func() { rep, _ := e.svc.Run(ctx, ap.Replay.ID, "owner"); done <- rep }()
		testkit.Eventually(t, 30*time.Second, "500 delivered", func() bool { return len(f.rec.got()) >= 500 })
		if f.on.CloseConnections(t, f.conn) == 0 {
			t.Fatal("no connection of the replaying engine found to close")
		}
		var rep engine.Replay
		select {
		case rep = <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("the replay did not end within 60s of its connection closing")
		}
		if rep.State == engine.StateFinished {
			t.Fatal("the fault came too late: the replay finished")
		}
		t.Logf("after the fault: state %s, sent %d, in doubt %d, duplicates %d: %s", rep.State, rep.Sent, rep.InDoubt, rep.Duplicates, rep.Note)
		f.expectStoppedByFault(t, rep)
		dups := f.account(t, "after the fault", ap.Replay.ID)

		if _, err := e.svc.Resume(ctx, ap.Replay.ID, "U_RESUMER"); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if rep, err = e.svc.Run(rctx, ap.Replay.ID, "owner2"); err != nil {
			t.Fatalf("resumed replay: %v", err)
		}
		f.expectNoResend(t, dups, f.account(t, "after resuming", ap.Replay.ID))
		t.Logf("resumed: state %s, sent %d of %d, in doubt %d: %s", rep.State, rep.Sent, rep.Total, rep.InDoubt, rep.Note)
		if rep.InDoubt > 0 && rep.State == engine.StateFinished {
			t.Errorf("a replay with %d copies in doubt ended finished", rep.InDoubt)
		}
		if rep.State != engine.StateFinished && !(rep.State == engine.StateStopped && rep.InDoubt > 0) {
			t.Errorf("resumed replay %s with %d in doubt: %s; want finished, or stopped by copies in doubt", rep.State, rep.InDoubt, rep.Note)
		}
	})
}
