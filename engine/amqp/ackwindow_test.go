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

// TestAReadThatAcksOutOfOrderHoldsSmallWindows: a classic queue finds each
// ack by walking what the acking channel holds from its oldest message, so
// a cursor, and a read kept for one, hold at most CursorPrefetch per
// channel there; a quorum queue's keeps Prefetch. The move sends every
// tenth message and leaves the rest held; the broker then holds the rest
// and gives it back in order. On RabbitMQ 3.10, 4.0 and 4.3.
func TestAReadThatAcksOutOfOrderHoldsSmallWindows(t *testing.T) {
	t.Parallel()
	const n, window = 2500, 1000
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		r := on.Dial(t)
		b := testBroker(t, onBroker(on, Config{}))
		ctx := context.Background()
		windows := func(c *Cursor) []int {
			var w []int
			for _, ch := range c.r.chans {
				w = append(w, ch.window)
			}
			return w
		}
		for _, tc := range []struct {
			kind string
			args amqp.Table
			want []int
		}{
			{"classic", nil, []int{window, window, n - 2*window}},
			{"quorum", amqp.Table{"x-queue-type": "quorum"}, []int{n}},
		} {
			t.Run(tc.kind, func(t *testing.T) {
				q := r.QueueOf(testkit.Name("ackwin-"+tc.kind), tc.args, n, 10)
				tgt := r.Queue(testkit.Name("ackwin-tgt"), nil)
				ec, err := b.OpenCursor(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				c := ec.(*Cursor)
				defer func() { _, _ = c.Release() }()
				mr, err := c.Move(ctx, engine.MoveRequest{
					Queue: q,
					Pick: func(m engine.Message) (engine.Pick, bool) {
						var i int
						if _, err := fmt.Sscanf(m.MessageID, "m-%d", &i); err == nil && i%10 == 0 {
							return engine.Pick{ID: m.MessageID, Target: tgt}, true
						}
						return engine.Pick{}, false
					},
				})
				if err != nil || len(mr.Sent) != n/10 || mr.Read != n {
					t.Fatalf("move: sent %d of %d, read %d of %d, %v", len(mr.Sent), n/10, mr.Read, n, err)
				}
				if got := windows(c); fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("the read's windows are %v, want %v", got, tc.want)
				}
				r.WaitCount(tgt, n/10, 20*time.Second)
				if ready, _ := r.Look(q); ready != 0 {
					t.Fatalf("the queue has %d ready while the cursor holds the rest", ready)
				}
				if back, err := c.Release(); err != nil || back != n-n/10 {
					t.Fatalf("release gave back %d, %v: want %d", back, err, n-n/10)
				}
				r.WaitCount(q, n-n/10, 20*time.Second)
				i := 0
				for _, d := range r.Drain(q, n-n/10, time.Second) {
					if i%10 == 0 {
						i++
					}
					if d.MessageId != fmt.Sprintf("m-%d", i) {
						t.Fatalf("given back out of order: %s where m-%d belongs", d.MessageId, i)
					}
					i++
				}
			})
		}
		t.Run("kept", func(t *testing.T) {
			q := r.QueueOf(testkit.Name("ackwin-kept"), nil, n, 10)
			key := "r_" + randomID()
			_, kept, err := b.ScanKeep(ctx, q, key, time.Minute, func(engine.Message) error { return nil })
			if err != nil || !kept {
				t.Fatalf("ScanKeep: kept %v, %v", kept, err)
			}
			ec, ok := b.TakeKept(key, q)
			if !ok {
				t.Fatal("the kept read was not taken")
			}
			c := ec.(*Cursor)
			defer func() { _, _ = c.Release() }()
			if got, want := windows(c), []int{window, window, n - 2*window}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("the kept read's windows are %v, want %v", got, want)
			}
		})
	})
}

// TestAReadThatAcksOutOfOrderIsSplitIntoAHundredWindowsAtMost: each window
// a classic queue is given back walks every one given back before it, so
// a large read's windows widen to keep it at 100 (never beyond Prefetch,
// and wider still when the connection's channels would not do).
func TestAReadThatAcksOutOfOrderIsSplitIntoAHundredWindowsAtMost(t *testing.T) {
	t.Parallel()
	b := &Broker{cfg: Config{}.withDefaults()}
	for _, tc := range []struct{ want, channelMax, window int }{
		{2500, 2047, 1000},
		{100000, 2047, 1000},
		{250000, 2047, 2500},
		{1000000, 2047, 10000},
		{2000000, 2047, 10000},
		{2000000, 255, 15749}, // 127 channels at most
	} {
		r := &holdReader{b: b, conn: &amqp.Connection{Config: amqp.Config{ChannelMax: uint16(tc.channelMax)}}, want: tc.want, classic: true}
		r.forAcks()
		if r.window != tc.window {
			t.Errorf("a read of %d on a connection of %d channels: windows of %d, want %d", tc.want, tc.channelMax, r.window, tc.window)
		}
	}
}
