package replay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestAConnectionLostInAReplayFromItsApprovalsRead closes the engine's
// broker connection in the middle of an unpaced whole replay whose run
// began from its approval's kept read (a classic DLQ fed through the
// default exchange, compared at approval: right after it the DLQ holds
// nothing ready). The broker takes back everything that read still held;
// the run stops, saying why, with nothing missing; every original is at
// the consumer or back in the DLQ, and what the broker holds twice is
// the replay's duplicates or in doubt. Resumed, the replay reads the DLQ
// afresh and sends the rest, never a copy the ledger recorded again. On
// RabbitMQ 3.10, 4.0 and 4.3 (a classic queue's store differs from 3.x
// to 4.x: only a classic DLQ's read is kept).
func TestAConnectionLostInAReplayFromItsApprovalsRead(t *testing.T) {
	t.Parallel()
	testkit.EachBrokerIn(t, testkit.Brokers(), func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		lostInAKeptRead(t, on)
	})
}

// lostInAKeptRead is TestAConnectionLostInAReplayFromItsApprovalsRead on
// one broker.
func lostInAKeptRead(t *testing.T, on testkit.Broker) {
	const n = 4000
	cfg := stopAtOnce
	cfg.Tune.KeepReads = true
	f := newFaultRun(t, on, nil, n, cfg)
	e := f.e
	ctx := context.Background()
	testkit.Eventually(t, time.Minute, "the preview's give-backs", func() bool { return e.rabbit.Count(f.dlq) == n })
	done := f.runAndCutAfter(t, n, -1, n/10, func() {
		if ready, consumers := e.rabbit.Look(f.dlq); ready != 0 || consumers == 0 {
			t.Errorf("right after the approval the DLQ holds %d ready with %d consumer(s): want its read kept", ready, consumers)
		}
	})
	var rep engine.Replay
	select {
	case rep = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the replay did not end within 3 minutes of the fault")
	}
	if rep.State == engine.StateFinished && rep.Sent == n {
		t.Fatal("the fault came too late: the replay finished")
	}
	t.Logf("after the fault: state %s, sent %d, duplicates %d, in doubt %d: %s", rep.State, rep.Sent, rep.Duplicates, rep.InDoubt, rep.Note)
	f.expectStoppedByFault(t, rep)
	dups := f.account(t, "after the fault", rep.ID)
	f.expectCountedTwice(t, "after the fault", rep)

	if _, err := e.svc.Control(ctx, rep.ID, engine.ControlResume, "U_RESUMER"); err != nil {
		t.Fatal(err)
	}
	rep, err := e.svc.Run(ctx, rep.ID, "owner2")
	exact := rep.State == engine.StateFinished && rep.InDoubt == 0
	inDoubt := rep.State == engine.StateStopped && rep.InDoubt > 0 && rep.Sent+rep.InDoubt == n && strings.Contains(rep.Note, "in doubt")
	if err != nil || !(exact || inDoubt) {
		t.Fatalf("resumed replay: %v, state %s, sent %d, in doubt %d: %s", err, rep.State, rep.Sent, rep.InDoubt, rep.Note)
	}
	f.expectNoResend(t, dups, f.account(t, "after resuming", rep.ID))
}
