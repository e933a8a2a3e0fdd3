package replay_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestAConnectionLostInAnUnpacedFilteredReplay closes the engine's broker
// connection in the middle of an unpaced replay, in steps of 100 up to
// 400, of a tenth of a classic DLQ fed through the default exchange: its cursor
// holds the unselected messages between steps and finds returns at the
// DLQ's tail (no tap). Cut during a move, the run stops, saying why, with
// nothing missing, and a resume sends the rest, never a recorded copy
// again; cut while a step settles, the next step reads on through a new
// cursor and the replay finishes. Either way every original is at the
// consumer or in the DLQ, every copy delivered is in the ledger, what the
// broker holds twice is the replay's duplicates or in doubt, no unselected
// message ever reaches a target, and the DLQ ends holding every unselected
// message exactly once. On a classic DLQ, and on a quorum one, which a
// replay without a tap reads without a cursor (each move and each look
// for returns reads it from its head, and the fault gives back what the
// move held), each on the broker everyDLQKind picks (every broker with
// DLQBOT_CLASSIC_ALL=1).
func TestAConnectionLostInAnUnpacedFilteredReplay(t *testing.T) {
	t.Parallel()
	everyDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		n := 10000 // 1,000 selected: steps of 100, 200, 400 and 300
		if raceOn {
			n = 5000 // make test's engine lane: 100, 200 and 200
		}
		selected := n / 10
		e, conn := newFaultEnv(t, on, false)
		r := e.rabbit
		work, dlq := testkit.Name("work"), testkit.Name("dlq")
		r.Topology(work, dlq, dlqArgs)
		fillTenth(r, dlq, work, n)
		f := &faultRun{e: e, on: on, conn: conn, src: work, dlq: dlq, rec: &recorder{}}
		for i := range n {
			f.originals = append(f.originals, fmt.Sprintf("m-%d", i))
		}
		f.p = preview(t, e, engine.Selection{DLQ: dlq, Source: work})
		if f.p.Selected != selected {
			t.Fatalf("preview selected %d, want %d", f.p.Selected, selected)
		}
		testkit.Eventually(t, time.Minute, "the preview's give-backs", func() bool { return r.Count(dlq) == n })
		// The fault comes as the 310th copy arrives: the tenth of the third
		// step (steps of 100, 200 and 400, or 200 under the race detector),
		// whose move then still reads on through the DLQ for the rest.
		const cutAt = 310
		reached := make(chan struct{})
		var seen atomic.Int32
		f.rec.setThen(func(amqp.Delivery) string {
			if seen.Add(1) == cutAt {
				close(reached)
			}
			return "ack"
		})
		r.Consume(work, f.rec.handle)

		ctx := context.Background()
		ap, err := replay.Approve(e.svc, ctx, f.p.Token, "U_APP", engine.Params{Step: 100, Cap: 400, Rate: -1, Timeout: 20 * time.Second}, true)
		if err != nil {
			t.Fatal(err)
		}
		names := f.connNames(t)
		done := make(chan engine.Replay, 1)
		go func() { rep, _ := e.svc.Run(ctx, ap.Replay.ID, "owner"); done <- rep }()
		select {
		case <-reached:
		case <-time.After(time.Minute):
			t.Fatalf("%d copies did not arrive within a minute", cutAt)
		}
		if f.cut(t, names) == 0 {
			t.Fatal("no connection of the replaying engine found to close")
		}
		var rep engine.Replay
		select {
		case rep = <-done:
		case <-time.After(2 * time.Minute):
			t.Fatal("the replay did not end within 2 minutes of the fault")
		}
		t.Logf("after the fault: state %s, step %d, sent %d of %d, in doubt %d, duplicates %d: %s",
			rep.State, rep.Step, rep.Sent, rep.Total, rep.InDoubt, rep.Duplicates, rep.Note)
		if rep.State == engine.StateFinished {
			// The fault came between two moves (the step settling): the
			// next step read on through a new cursor. Finished must then be
			// true of the broker, duplicates counted.
			if rep.Sent != selected || rep.Missing != 0 {
				t.Fatalf("finished with %d of %d sent, %d missing", rep.Sent, selected, rep.Missing)
			}
			f.account(t, "after the fault", rep.ID)
			f.expectCountedTwice(t, "after the fault", rep)
		} else {
			f.expectStoppedByFault(t, rep)
			dups := f.account(t, "after the fault", rep.ID)
			f.expectCountedTwice(t, "after the fault", rep)
			f.expectUnselectedStayed(t, "after the fault")
			rep = f.resumeAfterFault(t, rep.ID, dups, 2*time.Minute)
		}
		f.expectUnselectedStayed(t, "at the end")
		// A copy in doubt may not have reached the consumer: its original
		// stays in the DLQ (account found each original somewhere).
		if sent := ids(f.rec.got()); len(sent) < selected-rep.InDoubt || len(sent) > selected {
			t.Errorf("at the end the consumer got %d distinct messages, want the %d selected but for at most %d in doubt", len(sent), selected, rep.InDoubt)
		}
	})
}

// expectUnselectedStayed checks, against what account last drained from
// the DLQ and the consumer's deliveries, that every message of the DLQ the
// filter did not select (i%10 != 9, fillTenth) is in the DLQ exactly once
// and none reached the consumer.
func (f *faultRun) expectUnselectedStayed(t *testing.T, stage string) {
	t.Helper()
	got := ids(f.rec.got())
	for i, mid := range f.originals {
		if i%10 == 9 {
			continue
		}
		if f.inDLQ[mid] != 1 || got[mid] != 0 {
			t.Errorf("%s: unselected %s: %d in the DLQ, %d delivered; want 1 and 0", stage, mid, f.inDLQ[mid], got[mid])
		}
	}
}
