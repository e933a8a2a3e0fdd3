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

// TestAStoppedReplayYieldsToTheNextApproval is the guide's own workflow:
// replay A of 40 dead letters sends its first step of 10 to a consumer
// that rejects them, so they come back and A stops; the consumer is
// fixed; the DLQ is previewed again and replay B approved without a
// confirm step and without takeover=yes (A owned 30 of them and had not
// sent them). B finishes; A's record says it left them to B, B's that it
// took them over from A; A resumed sends none of them ("taken over by
// r_B"). Decided on the consumer (each id reached it, once after the fix,
// from B) and on the DLQ (empty).
func TestAStoppedReplayYieldsToTheNextApproval(t *testing.T) {
	t.Parallel()
	everyDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		const n, first = 40, 10
		if dlqArgs != nil {
			dlqArgs = testkit.Quorum(amqp.Table{"x-delivery-limit": 200})
		}
		e := newEnvOn(t, fast, on)
		r := e.rabbit
		src, dlq := r.DeadLetteredAs(dlqArgs, n, 100)
		ctx := context.Background()
		pa := preview(t, e, engine.Selection{DLQ: dlq})
		rec := &recorder{}
		rec.setThen(func(amqp.Delivery) string { return "reject" })
		r.Consume(src, rec.handle)

		prm := engine.Params{Step: first, Cap: 100, Rate: -1, Timeout: 20 * time.Second}
		apA, err := replay.Approve(e.svc, ctx, pa.Token, "U_A", prm, false)
		if err != nil {
			t.Fatal(err)
		}
		a := apA.Replay.ID
		repA, err := e.svc.Run(ctx, a, "owner-a")
		if err != nil {
			t.Fatal(err)
		}
		if repA.State != engine.StateStopped || repA.Sent != first {
			t.Fatalf("A ended %s with %d sent, want stopped after its first %d came back: %s", repA.State, repA.Sent, first, repA.Note)
		}

		// The consumer is fixed; the DLQ holds the 30 A did not send and
		// the 10 that came back.
		rec.setThen(func(amqp.Delivery) string { return "ack" })
		mark := len(rec.got())
		r.WaitCount(dlq, n, 30*time.Second)
		pb := previewToken(t, e, engine.Selection{DLQ: dlq})
		if pb.Selected != n {
			t.Fatalf("the second preview selected %d, want %d", pb.Selected, n)
		}
		apB, err := replay.Approve(e.svc, ctx, pb.Token, "U_B", engine.Params{Step: first, Cap: 100, Rate: -1, Timeout: 20 * time.Second}, false)
		if err != nil {
			t.Fatalf("B's approval, A stopped: %v (changes %+v)", err, apB.Changes)
		}
		b := apB.Replay.ID
		if got := apB.Replay.TakenFrom[a]; got != n-first {
			t.Errorf("B took %v over, want %d from %s", apB.Replay.TakenFrom, n-first, a)
		}
		repB, err := e.svc.Run(ctx, b, "owner-b")
		if err != nil {
			t.Fatal(err)
		}
		if repB.State != engine.StateFinished || repB.Sent != n {
			t.Fatalf("B ended %s, sent %d of %d: %s", repB.State, repB.Sent, n, repB.Note)
		}
		if !strings.Contains(repB.Note, "taken over from "+a) {
			t.Errorf("B's note does not say what it took over from %s: %s", a, repB.Note)
		}
		oldA, err := e.svc.Status(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if oldA.State != engine.StateStopped || oldA.LeftTo[b] != n-first || !strings.Contains(oldA.Note, "left to "+b) {
			t.Errorf("A is %s, left %v: %s; want stopped, %d left to %s", oldA.State, oldA.LeftTo, oldA.Note, n-first, b)
		}

		// Each id reached the fixed consumer once, from B.
		var after []amqp.Delivery
		testkit.Eventually(t, 30*time.Second, "every id at the fixed consumer", func() bool {
			after = rec.got()[mark:]
			return len(ids(after)) == n
		})
		for _, d := range after {
			if d.Headers["x-replay-id"] != b {
				t.Errorf("%s reached the fixed consumer from %v, want %s", d.MessageId, d.Headers["x-replay-id"], b)
			}
		}
		for id, k := range ids(after) {
			if k != 1 {
				t.Errorf("%s reached the fixed consumer %d times", id, k)
			}
		}
		if got := r.Count(dlq); got != 0 {
			t.Errorf("the DLQ holds %d after B, want 0", got)
		}

		// A resumed sends none of what B took over, and says so.
		if _, err := e.svc.Control(ctx, a, engine.ControlResume, "U_A"); err != nil {
			t.Fatal(err)
		}
		repA, err = e.svc.Run(ctx, a, "owner-a2")
		if err != nil {
			t.Fatal(err)
		}
		if repA.State != engine.StateFinished || repA.Sent != first || repA.Elsewhere != n-first || !strings.Contains(repA.Note, "taken over by "+b) {
			t.Errorf("A resumed: %s, sent %d, elsewhere %d: %s; want finished, %d left taken over by %s", repA.State, repA.Sent, repA.Elsewhere, repA.Note, n-first, b)
		}
		if got := len(rec.got()[mark:]); got != n {
			t.Errorf("the fixed consumer received %d after A resumed, want %d", got, n)
		}
	})
}
