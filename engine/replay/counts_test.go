package replay_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// A resumed replay plans again the copies the ledger does not name
// (missing, refused): it must count each once, so that missing + not
// delivered + sent never exceeds the total.
func TestResumedReplayCountsMissingOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	r := e.rabbit
	_, dlq := r.DeadLettered(30, 50)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	ch := r.Channel() // the first five vanish (taken one by one: nothing else held)
	for i := 0; i < 5; i++ {
		d, ok, err := ch.Get(dlq, false)
		if err != nil || !ok {
			t.Fatalf("get %d: %v %v", i, ok, err)
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	r.WaitCount(dlq, 25, 10*time.Second)
	// No consumer on the target: each step stops, unsettled, after its timeout.
	ctx := context.Background()
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Step: 10, Cap: 20, Rate: -1, Timeout: time.Second}, true)
	if err != nil {
		t.Fatal(err)
	}
	id := ap.Replay.ID
	rep, err := e.svc.Run(ctx, id, "w1")
	if err != nil || rep.State != engine.StateStopped || rep.Missing != 5 || rep.Sent != 5 {
		t.Fatalf("first run: %v, %s, %d missing, %d sent: want stopped, 5 missing, 5 sent", err, rep.State, rep.Missing, rep.Sent)
	}
	if _, err := e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER"); err != nil {
		t.Fatal(err)
	}
	rep, err = e.svc.Run(ctx, id, "w1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resumed: %s, sent %d, missing %d, not delivered %d, failures listed %d", rep.State, rep.Sent, rep.Missing, rep.Failed, len(rep.Failures))
	if rep.Missing != 5 || rep.Sent+rep.Missing+rep.Failed+rep.InDoubt > rep.Total {
		t.Fatalf("resumed replay counts %d missing, %d sent, %d not delivered of %d: want the 5 missing counted once", rep.Missing, rep.Sent, rep.Failed, rep.Total)
	}
	missing := 0
	for _, f := range rep.Failures {
		if f.Kind == engine.FailureMissing {
			missing++
		}
	}
	if missing != 5 {
		t.Fatalf("%d missing failures listed, want 5", missing)
	}
	if n := r.Count(dlq); n != 30-5-rep.Sent {
		t.Fatalf("DLQ holds %d, want %d", n, 30-5-rep.Sent)
	}
}

// failingLedger is the real ledger whose next Confirm fails.
type failingLedger struct {
	engine.Ledger
	failConfirm atomic.Int32
}

func (f *failingLedger) Confirm(ctx context.Context, es []engine.LedgerEntry) error {
	if f.failConfirm.Add(-1) >= 0 {
		return errors.New("injected: confirm not recorded")
	}
	return f.Ledger.Confirm(ctx, es)
}

// Copies the broker confirmed whose send the ledger could not record were
// delivered: they are sent duplicates (the originals stay in the DLQ and
// are never sent again), never "not delivered".
func TestConfirmedButUnrecordedCopiesAreNotCountedUndelivered(t *testing.T) {
	t.Parallel()
	fl := &failingLedger{}
	e := newEnvWith(t, fast, func(d *replay.Deps) {
		fl.Ledger = d.Ledger
		d.Ledger = fl
	})
	r := e.rabbit
	src, dlq := r.DeadLettered(20, 50)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	var delivered atomic.Int64
	r.Consume(src, func(amqp.Delivery) string { delivered.Add(1); return "ack" })
	fl.failConfirm.Store(1)
	ctx := context.Background()
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", oneStep, false)
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := e.svc.Run(ctx, ap.Replay.ID, "w1")
	t.Logf("%s: sent %d, duplicates %d, not delivered %d, in doubt %d: %s", rep.State, rep.Sent, rep.Duplicates, rep.Failed, rep.InDoubt, rep.Note)
	if rep.Failed != 0 {
		t.Fatalf("%d copies counted not delivered: every copy was confirmed by the broker", rep.Failed)
	}
	if rep.Duplicates == 0 || rep.State == engine.StateFinished {
		t.Fatalf("%s with %d duplicates: want the unrecorded copies as duplicates and the replay stopped", rep.State, rep.Duplicates)
	}
	// The broker agrees: every counted send reached the target, and the
	// DLQ still holds the originals of the unrecorded ones.
	testkit.Eventually(t, 20*time.Second, "the target to get every sent copy", func() bool { return delivered.Load() == int64(rep.Sent) })
	if n := r.Count(dlq); n != 20-rep.Sent+rep.Duplicates {
		t.Fatalf("DLQ holds %d, want %d (unsent + originals of unrecorded copies)", n, 20-rep.Sent+rep.Duplicates)
	}
}

// The same for refused copies: a target deleted since the preview refuses
// its copies in every run; a resumed replay counts each of them once.
func TestResumedReplayCountsRefusedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	r := e.rabbit
	a, b, dlq := testkit.Name("a"), testkit.Name("b"), testkit.Name("dlq")
	r.Topology(a, dlq, nil)
	r.Queue(b, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	var bs []amqp.Publishing
	for i, m := range testkit.Msgs(4, 50) {
		m.MessageId = "b-" + string(rune('0'+i))
		bs = append(bs, m)
	}
	r.Reject(b, bs...) // first in the DLQ: the first step (in DLQ order) takes them
	r.WaitCount(dlq, 4, 20*time.Second)
	r.Reject(a, testkit.Msgs(10, 50)...)
	r.WaitCount(dlq, 14, 20*time.Second)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	testkit.DeleteQueue(b) // b's copies are now unroutable
	ctx := context.Background()
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Step: 10, Cap: 20, Rate: -1, Timeout: time.Second}, true)
	if err != nil {
		t.Fatal(err)
	}
	id := ap.Replay.ID
	rep, err := e.svc.Run(ctx, id, "w1") // a has no consumer: the step stops unsettled
	if err != nil || rep.State != engine.StateStopped || rep.Failed == 0 {
		t.Fatalf("first run: %v, %s, %d not delivered: want stopped with some refused", err, rep.State, rep.Failed)
	}
	if _, err := e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER"); err != nil {
		t.Fatal(err)
	}
	rep, err = e.svc.Run(ctx, id, "w1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resumed: %s, sent %d, not delivered %d, missing %d", rep.State, rep.Sent, rep.Failed, rep.Missing)
	if rep.Failed != 4 || rep.Sent != 10 || rep.Sent+rep.Failed+rep.Missing > rep.Total {
		t.Fatalf("resumed replay: %d sent, %d not delivered, %d missing of %d: want 10 sent and b's 4 refused, counted once",
			rep.Sent, rep.Failed, rep.Missing, rep.Total)
	}
	if n := r.Count(dlq); n != 4 {
		t.Fatalf("DLQ holds %d, want b's 4 originals", n)
	}
}
