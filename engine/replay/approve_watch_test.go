package replay_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestApprovalByWatchNeedsNoStatistics is issue 23's approval without a
// read and without waiting for the management statistics, on a DLQ fed
// through a dead-letter exchange (the watch's case), quorum on every
// broker and classic on one (everyDLQKind). The engine is given no management statistics (so
// an approval the watch does not decide compares and reads the DLQ), and
// then:
//   - an unchanged preview is approved without a read of the DLQ, its
//     watch queue is deleted, and the
//     replay sends every previewed message exactly once;
//   - ten new dead letters after the preview change nothing previewed:
//     approved without a read, and the replay leaves the ten in the DLQ;
//   - one previewed message consumed by someone else while a new dead
//     letter takes its place (the DLQ's ready count is the preview's) is
//     seen: the approval reads the DLQ and shows the one message gone.
func TestApprovalByWatchNeedsNoStatistics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		arrive   int
		consumed bool
	}{{"unchanged", 0, false}, {"arrivals", 10, false}, {"consumed-and-replaced", 1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			everyDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
				ctx := context.Background()
				n := 300
				cfg := fast
				cfg.Tune.ProofFrom = 1
				// No management statistics: only the watch can prove.
				e := newEnvTuned(t, cfg, on, func(d *replay.Deps) { d.Counters = testkit.CountersOff{} })
				r := e.rabbit
				src, dlq := testkit.Name("src"), testkit.Name("dlq")
				dlx := r.DLXTopology(src, dlq, dlqArgs)
				r.Reject(src, testkit.Msgs(n, 100)...)
				r.WaitCount(dlq, n, 30*time.Second)
				rec := &recorder{}
				r.Consume(src, rec.handle)
				p, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U_REQ")
				if err != nil || p.Selected != n || p.Token == "" {
					t.Fatalf("preview: %v, selected %d of %d", err, p.Selected, n)
				}
				f, err := e.store.Tokens().LoadHeader(ctx, p.Token)
				if err != nil || f.Proof == nil || f.Proof.Watch == "" {
					t.Fatalf("the preview opened no watch: %v, proof %+v", err, f.Proof)
				}
				t.Cleanup(func() { _ = e.broker.CloseWatch(context.Background(), f.Proof.Watch) })
				if st, err := e.broker.Inspect(ctx, f.Proof.Watch); err != nil || !st.Exists {
					t.Fatalf("the watch %s is not on the broker: %v", f.Proof.Watch, err)
				}
				testkit.Eventually(t, 60*time.Second, "the preview's give-backs in the DLQ", func() bool { return r.Count(dlq) == n })
				if tc.consumed {
					d, ok, err := r.Channel().Get(dlq, false)
					if err != nil || !ok {
						t.Fatalf("the other consumer's get: %v, %v", ok, err)
					}
					if err := d.Ack(false); err != nil {
						t.Fatal(err)
					}
				}
				var fresh []amqp.Publishing
				for i := range tc.arrive {
					fresh = append(fresh, amqp.Publishing{MessageId: fmt.Sprintf("new-%d", i), DeliveryMode: amqp.Persistent, Body: []byte("new")})
				}
				if err := testkit.PublishTo(r.Conn, dlx, dlq, fresh...); err != nil {
					t.Fatal(err)
				}
				left := n + tc.arrive
				if tc.consumed {
					left--
				}
				r.WaitCount(dlq, left, 30*time.Second)
				before := e.scans.scans.Load()
				ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Step: 100, Cap: 100000, Rate: -1, Timeout: time.Minute}, false)
				if read := e.scans.scans.Load() > before; read != tc.consumed {
					t.Errorf("the approval read the DLQ: %v, want %v", read, tc.consumed)
				}
				if tc.consumed {
					gone := changed(ap.Changes, engine.ChangeMessagesGone)
					if !errors.Is(err, engine.ErrChanged) || gone != 1 {
						t.Fatalf("approval after one message was consumed and one arrived: %v, changes %+v; want ErrChanged with 1 message gone", err, ap.Changes)
					}
					return
				}
				if err != nil {
					t.Fatalf("approval: %v, changes %+v", err, ap.Changes)
				}
				if st, err := e.broker.Inspect(ctx, f.Proof.Watch); err != nil || st.Exists {
					t.Errorf("the watch %s is still on the broker after the approval (%v)", f.Proof.Watch, err)
				}
				rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner")
				if err != nil || rep.State != engine.StateFinished || rep.Sent != n {
					t.Fatalf("run: %v, %s, sent %d of %d: %s", err, rep.State, rep.Sent, n, rep.Note)
				}
				testkit.Eventually(t, 90*time.Second, "every copy at the consumer", func() bool { return len(rec.got()) >= n })
				got := ids(rec.got())
				for i := range n {
					if id := fmt.Sprintf("m-%d", i); got[id] != 1 {
						t.Fatalf("%s reached the consumer %d times, want once", id, got[id])
					}
				}
				if len(got) != n {
					t.Errorf("the consumer got %d ids, want %d", len(got), n)
				}
				// A quorum DLQ shows what the run's last read gave back a
				// moment after the read (3.10 most of all).
				testkit.Eventually(t, 30*time.Second, fmt.Sprintf("the %d new dead letters back in the DLQ", tc.arrive), func() bool { return r.Count(dlq) == tc.arrive })
				if left := r.Drain(dlq, tc.arrive, 2*time.Second); len(left) != tc.arrive || tc.arrive > 0 && ids(left)["new-0"] != 1 {
					t.Errorf("the DLQ held %d messages (%v), want the %d new dead letters", len(left), ids(left), tc.arrive)
				}
			})
		})
	}
}
