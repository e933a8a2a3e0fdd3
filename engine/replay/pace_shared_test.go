package replay_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestTwoAutoPacedReplaysShareOneTarget: two replays at rate=auto (max
// 200), from two DLQs to one target queue (to=) read by one slow consumer
// (about 50 msg/s), run at once. Each pacer counts only its own
// publishes, so it takes the other's for live traffic and slows for it:
// together they must not flood the consumer — the target's backlog,
// sampled by passive declare every 100 ms, stays under 150, as one
// replay's does (TestPaceToConsumer) — and both finish, each copy at the
// consumer once, with its replay's id, both DLQs empty.
func TestTwoAutoPacedReplaysShareOneTarget(t *testing.T) {
	t.Parallel()
	testkit.EachBrokerIn(t, testkit.ClassicOn(t.Name()), func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		const n = 300
		e := newEnvOn(t, replay.Config{}, on)
		r := e.rabbit
		target := r.Queue(testkit.Name("shared"), nil)
		t.Cleanup(func() { r.DeleteQueue(target) })
		ctx := context.Background()
		var dlqs [2]string
		var tokens [2]string
		for i := range dlqs {
			_, dlqs[i] = r.DeadLettered(n, 128)
			p := preview(t, e, engine.Selection{DLQ: dlqs[i], To: target})
			tokens[i] = p.Token
		}
		var (
			mu     sync.Mutex
			got    = map[string]int{} // "<replay id> <message id>" → copies
			waited time.Duration
		)
		slowConsumerOf(t, r, target, func(d amqp.Delivery, w time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			got[fmt.Sprintf("%v %s", d.Headers[engine.HeaderReplayID], d.MessageId)]++
			waited += w
		})
		stop := sampleBacklog(r, target, 100*time.Millisecond)
		start := time.Now()
		var runs []chan engine.Replay
		for _, tok := range tokens {
			ap, err := replay.Approve(e.svc, ctx, tok, "U_APP", engine.Params{Auto: true, Max: 200, Step: 100, Cap: n, Timeout: time.Minute}, false)
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, runAsyncReplay(t, e, ap.Replay.ID, "owner"))
		}
		var ids []string
		for _, ran := range runs {
			rep := <-ran
			if rep.State != engine.StateFinished || rep.Sent != n {
				t.Fatalf("replay %s: %s, sent %d of %d: %s", rep.ID, rep.State, rep.Sent, n, rep.Note)
			}
			ids = append(ids, rep.ID)
			t.Logf("replay %s finished: %s", rep.ID, rep.Pace)
		}
		took := time.Since(start)
		worst := stop()
		testkit.Eventually(t, 10*time.Second, "the consumer's callback for every copy", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) >= 2*n
		})
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			for i := range n {
				if k := fmt.Sprintf("%s m-%d", id, i); got[k] != 1 {
					t.Fatalf("%s: %d copies at the consumer, want 1", k, got[k])
				}
			}
		}
		if len(got) != 2*n {
			t.Fatalf("%d distinct copies at the consumer, want %d", len(got), 2*n)
		}
		for _, dlq := range dlqs {
			if c := r.Count(dlq); c != 0 {
				t.Fatalf("%d message(s) left in %s", c, dlq)
			}
		}
		if worst >= 150 {
			t.Errorf("the two replays left a backlog of %d in their shared target, want under 150", worst)
		}
		t.Logf("two replays of %d to one consumer in %v (about %v of its work); largest backlog %d; the consumer waited %v in all",
			n, took.Round(100*time.Millisecond), (2 * n * consumerDelay).Round(100*time.Millisecond), worst, waited.Round(10*time.Millisecond))
	})
}
