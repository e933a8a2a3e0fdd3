package replay_test

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestATappedPacedReplayGoesOnAfterLosingItsConnection closes a tapped
// engine's broker connection in the middle of a paced one-step replay from
// a classic DLQ. The run goes on through a new connection and judges the
// step against the bypass baseline it read before the loss
// (settle_bypass.go): the originals the lost connection held, back in the
// DLQ, are no bypass ("tapped": it finishes through the tap, none back,
// every original accounted for), and returns the consumer published
// straight to the DLQ, past the tap, are ("bypassed": it switches to
// re-reads, counts each of them, as check does, and stops on them; the
// copies the loss caught without a confirm may stay in doubt there, as
// the stop comes before the reconcile that would look for them).
func TestATappedPacedReplayGoesOnAfterLosingItsConnection(t *testing.T) {
	t.Parallel()
	for _, bypass := range []bool{false, true} {
		name := "tapped"
		if bypass {
			name = "bypassed"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testkit.EachBrokerIn(t, testkit.ClassicOn(t.Name()), func(t *testing.T, on testkit.Broker) {
				t.Parallel()
				const n = 600
				f := newTappedFaultRun(t, on, nil, n)
				var published atomic.Int64
				var arrived func() []arrival
				if !bypass {
					arrived = timeArrivals(f.rec)
				}
				if bypass {
					pub := f.e.rabbit.Channel()
					f.rec.setThen(func(d amqp.Delivery) string {
						k, _ := strconv.Atoi(strings.TrimPrefix(d.MessageId, "m-"))
						if k%3 != 0 {
							return "ack"
						}
						if err := publishPastTap(pub, f.dlq, d, "order not found", amqp.Table{"x-original-exchange": "", "x-original-routingKey": f.src}); err != nil {
							t.Errorf("publish past the tap: %v", err)
						}
						published.Add(1)
						return "ack"
					})
				}
				var rep engine.Replay
				select {
				case rep = <-f.runAndCut(t, n, 150, 150):
				case <-time.After(3 * time.Minute):
					t.Fatal("the replay did not end within 3 minutes of the fault")
				}
				t.Logf("after the fault: state %s, mode %s, sent %d, returned %d, duplicates %d, in doubt %d: %s",
					rep.State, rep.ReturnsMode, rep.Sent, rep.Returned, rep.Duplicates, rep.InDoubt, rep.Note)
				if rep.Missing != 0 || rep.Settled != rep.Sent {
					t.Fatalf("the step the loss cut was not judged after the reconnect: sent %d, settled %d, in doubt %d, missing %d: %s",
						rep.Sent, rep.Settled, rep.InDoubt, rep.Missing, rep.Note)
				}
				if !bypass {
					if rep.InDoubt != 0 {
						t.Fatalf("in doubt %d after the reconnect's reconcile: %s", rep.InDoubt, rep.Note)
					}
					if rep.Sent != n {
						t.Fatalf("the paced replay did not go on to the end: sent %d of %d: %s", rep.Sent, n, rep.Note)
					}
					if rep.State != engine.StateFinished || rep.ReturnsMode != engine.ReturnsTap || rep.Returned != 0 || !strings.Contains(rep.Note, "0 came back") {
						t.Fatalf("replay %s mode %q returned %d: %s; want finished through the tap, none back", rep.State, rep.ReturnsMode, rep.Returned, rep.Note)
					}
					f.account(t, "after the fault", rep.ID)
					expectPacedAcross(t, arrived(), 150)
					return
				}
				want := int(published.Load())
				if rep.State != engine.StateStopped || rep.ReturnsMode != engine.ReturnsReread || !strings.Contains(rep.Note, "without passing its bindings") {
					t.Fatalf("replay %s mode %q: %s; want stopped, switched to re-reads, saying why", rep.State, rep.ReturnsMode, rep.Note)
				}
				if rep.Returned != want {
					t.Fatalf("returned %d, but the consumer published %d straight to the DLQ", rep.Returned, want)
				}
				c, err := f.e.svc.Check(t.Context(), rep.ID, "")
				if err != nil {
					t.Fatal(err)
				}
				if c.Returned != want {
					t.Fatalf("check: %d back, want %d", c.Returned, want)
				}
			})
		})
	}
}
