package amqp

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestCursorTailSeesArrivalsOnce reads a classic and a quorum queue of 20
// in windows of 6 with a cursor, moving m-2 and m-19 (so the last window
// has room the broker fills with arrivals), then publishes 7 behind it:
// Arrivals hands out exactly those 7, a second call after 3 more exactly
// those 3, the cursor holds 18 + 10, and the release gives all 28 back in
// their order.
func TestCursorTailSeesArrivalsOnce(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"classic", "quorum"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var args amqp.Table
			if kind == "quorum" {
				args = testkit.Quorum(nil)
			}
			r := testkit.Dial(t)
			q := r.QueueOf(testkit.Name("tail"), args, 20, 50)
			tgt := r.Queue(testkit.Name("tail-tgt"), nil)
			b := testBroker(t, Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL, Prefetch: 6})
			ctx := context.Background()
			c, err := b.OpenCursor(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _, _ = c.Release() }()
			mr, err := c.Move(ctx, engine.MoveRequest{
				Queue: q,
				Pick: func(m engine.Message) (engine.Pick, bool) {
					if m.MessageID == "m-2" || m.MessageID == "m-19" {
						return engine.Pick{ID: m.MessageID, Target: tgt}, true
					}
					return engine.Pick{}, false
				},
			})
			if err != nil || len(mr.Sent) != 2 || !c.Done() {
				t.Fatalf("move: sent %d, done %v, %v", len(mr.Sent), c.Done(), err)
			}
			tc := c.(engine.TailCursor)
			more := func(from, n int) {
				t.Helper()
				msgs := make([]amqp.Publishing, n)
				for i := range msgs {
					msgs[i] = testkit.Msg(fmt.Sprintf("m-%d", from+i), testkit.Body(from+i, 50), nil)
				}
				r.Publish(q, msgs...)
				var got []string
				if err := tc.Arrivals(ctx, func(m engine.Message) { got = append(got, m.MessageID) }); err != nil {
					t.Fatal(err)
				}
				if len(got) != n || got[0] != fmt.Sprintf("m-%d", from) || got[n-1] != fmt.Sprintf("m-%d", from+n-1) {
					t.Fatalf("arrivals %v, want m-%d … m-%d", got, from, from+n-1)
				}
			}
			more(20, 7)
			more(27, 3)
			if h := c.Held(); h != 28 {
				t.Fatalf("the cursor holds %d, want 28", h)
			}
			if n, err := c.Release(); err != nil || n != 28 {
				t.Fatalf("release gave back %d: %v; want 28", n, err)
			}
			r.WaitCount(q, 28, 20*time.Second)
			ds := r.Drain(q, 28, 10*time.Second)
			var ids []string
			for i := 0; i < 30; i++ {
				if i != 2 && i != 19 {
					ids = append(ids, fmt.Sprintf("m-%d", i))
				}
			}
			for i, d := range ds {
				if i >= len(ids) || d.MessageId != ids[i] {
					t.Fatalf("the queue holds %s at %d, want %v in order", d.MessageId, i, ids)
				}
			}
			if len(ds) != len(ids) {
				t.Fatalf("drained %d, want %d", len(ds), len(ids))
			}
		})
	}
}
