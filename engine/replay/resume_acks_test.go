package replay_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// An unpaced replay whose connection is cut mid-way leaves originals of
// confirmed copies in the DLQ (acks the connection did not carry). The
// resume (resend=in-doubt when copies are in doubt) completes those acks:
// it ends finished with the DLQ empty of the selection, every message
// delivered at least once, none of the confirmed ones sent again, and no
// more messages delivered twice than the copies in doubt it sent again
// (the count it gives of what a consumer may have seen twice). Before,
// it finished "… duplicate(s): delivered, their originals also still in
// the DLQ", and they were.
func TestAResumedReplayLeavesNoneOfItsSelectionInTheDLQ(t *testing.T) {
	t.Parallel()
	eachDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		const n = 2000
		f := newFaultRun(t, on, dlqArgs, n)
		e, r, ctx := f.e, f.e.rabbit, context.Background()
		ap, err := replay.Approve(e.svc, ctx, f.p.Token, "U_APP", engine.Params{Step: n, Cap: n, Rate: -1, Timeout: 30 * time.Second}, true)
		if err != nil {
			t.Fatal(err)
		}
		id := ap.Replay.ID
		var rep engine.Replay
		// Cut the connection until a loss leaves originals of confirmed
		// copies behind (a loss whose acks all got through leaves none).
		for loss := 1; ; loss++ {
			if loss > 1 {
				if _, err := e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER"); err != nil {
					t.Fatal(err)
				}
			}
			names := f.connNames(t)
			before := len(f.rec.got())
			done := make(chan engine.Replay, 1)
			go func() { rep, _ := e.svc.Run(ctx, id, "owner-"+strconv.Itoa(loss)); done <- rep }()
			testkit.Eventually(t, 2*time.Minute, "copies delivered before the fault", func() bool { return len(f.rec.got()) >= before+n/10 })
			testkit.Eventually(t, 30*time.Second, "the engine's connection closed", func() bool { return f.cut(t, names) > 0 })
			select {
			case rep = <-done:
			case <-time.After(2 * time.Minute):
				t.Fatal("the replay did not end within 2 minutes of its connection closing")
			}
			if rep.State == engine.StateFinished {
				t.Fatalf("loss %d came too late: the replay finished", loss)
			}
			f.expectStoppedByFault(t, rep)
			t.Logf("after loss %d: sent %d, duplicates %d, in doubt %d: %s", loss, rep.Sent, rep.Duplicates, rep.InDoubt, rep.Note)
			if rep.Duplicates > 0 || loss == 4 || rep.Sent > n/2 {
				break
			}
		}
		dups := rep.Duplicates
		if dups == 0 {
			t.Logf("no loss left an original of a confirmed copy behind: the resume is checked all the same")
		}
		action := engine.ControlResume
		if rep.InDoubt > 0 {
			action = engine.ControlResumeResend
		}
		if _, err := e.svc.Control(ctx, id, action, "U_RESUMER"); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		if rep, err = e.svc.Run(rctx, id, "owner-last"); err != nil {
			t.Fatal(err)
		}
		t.Logf("resumed (%s): state %s, sent %d, resent %d, duplicates %d, acked %d: %s", action, rep.State, rep.Sent, rep.Resent, rep.Duplicates, rep.DuplicatesAcked, rep.Note)
		if rep.State != engine.StateFinished || rep.Sent != n || rep.Duplicates != 0 || rep.DuplicatesAcked < dups {
			t.Fatalf("resumed: %s, %d of %d sent, %d duplicates left, %d acked of %d: %s; want finished with every original of a confirmed copy acked",
				rep.State, rep.Sent, n, rep.Duplicates, rep.DuplicatesAcked, dups, rep.Note)
		}
		// The broker decides: the target drained, the DLQ quiet and empty.
		since := time.Now()
		testkit.Eventually(t, 60*time.Second, "the target drained and the DLQ quiet", func() bool {
			st, err := e.broker.Counters(ctx, f.dlq)
			return err == nil && st.SampledAt.After(since.Add(time.Second)) && st.Unacked == 0 && st.Consumers == 0 && r.Count(f.src) == 0
		})
		if k := r.Count(f.dlq); k != 0 {
			left := ids(r.Drain(f.dlq, k, 10*time.Second))
			t.Fatalf("a finished replay left %d message(s) in the DLQ (%d ids)", k, len(left))
		}
		delivered := ids(f.rec.got())
		twice := 0
		for _, mid := range f.originals {
			switch c := delivered[mid]; {
			case c == 0:
				t.Errorf("%s never delivered", mid)
			case c > 1:
				twice++
			}
		}
		for _, d := range f.rec.got() {
			if d.Headers["x-replay-id"] != id {
				t.Fatalf("%s delivered with x-replay-id %v, want %s", d.MessageId, d.Headers["x-replay-id"], id)
			}
		}
		f.expectMarkedExtras(t, id)
		t.Logf("the consumer got %d ids twice; the replay resent %d copies in doubt (a consumer may have seen each twice)", twice, rep.Resent)
		if twice > rep.Resent {
			t.Fatalf("%d ids delivered twice, but the replay says only %d may have been", twice, rep.Resent)
		}
	})
}
