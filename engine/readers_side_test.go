package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestAPreviewBesideAReplayEndsAndLetsItFinish: a paced replay of 1,000 of
// a DLQ's 2,000 dead letters (rate 200, steps 100 to 400) and, from its
// first delivery until it ends, previews of the same DLQ. The preview does not wait for what the
// replay's read holds: it ends within 30 s and counts those messages as
// held by the replay, naming it. The replay, which may meet its picks held
// by the preview's read, waits for that read at most and never calls it
// another client: it finishes, and the consumer received each id once.
func TestAPreviewBesideAReplayEndsAndLetsItFinish(t *testing.T) {
	t.Parallel()
	everyDLQKindOn(t, []testkit.Broker{testkit.Rabbit3}, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		// Two sources dead-letter into one DLQ in blocks of 50: a replay
		// of one source's 1,000 reads past the other's, and its cursor
		// holds those between steps (what a preview beside it meets).
		const n, block = 1000, 50
		e := newEnvOn(t, fast, on)
		r := e.rabbit
		src, other, dlq := testkit.Name("src"), testkit.Name("other"), testkit.Name("dlq")
		// Through an exchange of its own: the replay finds returns through
		// a tap and reads through a cursor.
		ex := r.DLXTopology(src, dlq, dlqArgs)
		r.Queue(other, amqp.Table{"x-dead-letter-exchange": ex, "x-dead-letter-routing-key": dlq})
		for b := 0; b < n/block; b++ {
			var mine, theirs []amqp.Publishing
			for i := b * block; i < (b+1)*block; i++ {
				mine = append(mine, testkit.Msg(fmt.Sprintf("a-%d", i), testkit.Body(i, 100), nil))
				theirs = append(theirs, testkit.Msg(fmt.Sprintf("b-%d", i), testkit.Body(i, 100), nil))
			}
			r.Reject(src, mine...)
			r.Reject(other, theirs...)
		}
		r.WaitCount(dlq, 2*n, 30*time.Second)
		p := preview(t, e, engine.Selection{DLQ: dlq, Source: src})
		if p.Selected != n {
			t.Fatalf("selected %d of %s's, want %d", p.Selected, src, n)
		}
		first := make(chan struct{})
		rec := &recorder{}
		once := false
		rec.setThen(func(amqp.Delivery) string {
			if !once {
				once = true
				close(first)
			}
			return "ack"
		})
		r.Consume(src, rec.handle)
		ctx := context.Background()
		ap, err := e.svc.Approve(ctx, p.Token, "U_APP", engine.Params{Step: 100, Cap: 400, Rate: 200, Timeout: 30 * time.Second}, false)
		if err != nil {
			t.Fatal(err)
		}
		id := ap.Replay.ID
		done := runAsync(t, e, id)
		select {
		case <-first:
		case <-time.After(30 * time.Second):
			t.Fatal("no delivery within 30 s")
		}
		// Previews one after the other while the replay runs: each meets
		// the replay at another point (sending a step, settling one).
		var rep engine.Replay
		held, met, previews := 0, 0, 0
		for ended := false; !ended; {
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			start := time.Now()
			side, err := e.svc.Preview(pctx, engine.Selection{DLQ: dlq}, "U_SIDE")
			took := time.Since(start)
			cancel()
			if err != nil {
				t.Fatalf("preview %d beside the replay failed after %s: %v", previews+1, took, err)
			}
			previews++
			if took > 15*time.Second {
				t.Errorf("preview %d took %s beside the replay", previews, took)
			}
			t.Logf("preview beside the replay: %s, scanned %d, coverage %+v, held by replays %+v", took, side.Scanned, side.Coverage, side.HeldByReplay)
			if h := side.HeldByReplay; h != nil {
				if len(h.Replays) != 1 || h.Replays[0] != id {
					t.Errorf("preview names %v as holders, want %s", h.Replays, id)
				}
				held += h.Messages
				met++
				if pr := side.Problems; len(pr) == 0 || pr[0].Kind != engine.ProblemPartialRead || !strings.Contains(pr[0].Detail, "held by replay "+id) {
					t.Errorf("the preview's first problem does not name %s holding messages: %+v", id, pr)
				}
			} else if c := side.Coverage; c.HeldElsewhere > 0 {
				t.Errorf("preview could not read %d message(s) and named no replay holding them", c.HeldElsewhere)
			}
			select {
			case rep = <-done:
				ended = true
			case <-time.After(200 * time.Millisecond):
			}
		}
		t.Logf("%d previews, %d of them met %d message(s) held by %s", previews, met, held, id)
		if rep.State != engine.StateFinished {
			t.Fatalf("replay %s: %s", rep.State, rep.Note)
		}
		testkit.Eventually(t, 30*time.Second, "every id at the consumer", func() bool { return len(ids(rec.got())) == n })
		for mid, k := range ids(rec.got()) {
			if k != 1 {
				t.Errorf("%s delivered %d times", mid, k)
			}
		}
		if met == 0 || held == 0 {
			t.Errorf("%d preview(s) met messages held by %s, %d of them counted: the test did not test", met, id, held)
		}
		r.WaitCount(dlq, n, 30*time.Second) // the other source's, given back
	})
}
