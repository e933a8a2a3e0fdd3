package bench_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	dlqamqp "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/internal/testkit"
)

// setup is how dead letters reach a DLQ.
type setup string

const (
	defaultExchange setup = "default-exchange" // x-dead-letter-exchange "", routing key the DLQ's name
	boundDLX        setup = "dlx"              // a direct exchange the DLQ is bound to
)

// dlqFixture is a DLQ and the work queues that dead-letter into it.
type dlqFixture struct {
	r        *testkit.Rabbit
	dlq      string
	exchange string // "" through the default exchange
}

// newDLQ declares a classic DLQ fed as s says, and work queues named
// sources that dead-letter into it; all are deleted after the benchmark,
// with any dlqbot tap of the DLQ.
func newDLQ(r *testkit.Rabbit, s setup, sources ...string) dlqFixture {
	f := dlqFixture{r: r, dlq: testkit.Name("dlq")}
	if s == boundDLX {
		f.exchange = r.DLXTopology(sources[0], f.dlq, nil)
	} else {
		r.Topology(sources[0], f.dlq, nil)
		r.DeleteTapAfter(f.dlq)
	}
	for _, src := range sources[1:] {
		r.Queue(src, amqp.Table{"x-dead-letter-exchange": f.exchange, "x-dead-letter-routing-key": f.dlq})
	}
	return f
}

// fill puts n persistent 1 KB dead letters into the DLQ the way they reach
// it (through its exchange), message i dead-lettered from sourceOf(i), with
// the x-death headers the broker writes, and waits until the DLQ holds n.
func (f dlqFixture) fill(b *testing.B, n int, sourceOf func(i int) string) {
	b.Helper()
	died := time.Now().Add(-time.Hour).Truncate(time.Second)
	const batch = 10000
	for i := 0; i < n; i += batch {
		msgs := make([]amqp.Publishing, min(batch, n-i))
		for j := range msgs {
			src := sourceOf(i + j)
			h := testkit.DeathHeaders(src, died)
			h["x-first-death-exchange"] = f.exchange
			h["x-death"].([]any)[0].(amqp.Table)["exchange"] = f.exchange
			msgs[j] = testkit.Msg(fmt.Sprintf("m-%d", i+j), testkit.Body(i+j, 1024), h)
		}
		if err := testkit.PublishTo(f.r.Conn, f.exchange, f.dlq, msgs...); err != nil {
			b.Fatalf("fill %s: %v", f.dlq, err)
		}
	}
	f.r.WaitCount(f.dlq, n, 3*time.Minute+time.Duration(n/500)*time.Second)
}

// autoAck is a healthy consumer on a target queue: auto-ack, counting what
// it receives and when the last arrived.
type autoAck struct {
	n    atomic.Int64
	last atomic.Int64 // unix nanoseconds of the latest delivery
}

func consumeAutoAck(b *testing.B, r *testkit.Rabbit, queue string) *autoAck {
	b.Helper()
	ch := r.Channel()
	ds, err := ch.Consume(queue, testkit.Name("healthy"), true, false, false, false, nil)
	if err != nil {
		b.Fatalf("consume %s: %v", queue, err)
	}
	c := &autoAck{}
	go func() {
		for range ds {
			c.n.Add(1)
			c.last.Store(time.Now().UnixNano())
		}
	}()
	listed(b, queue)
	return c
}

// listed waits until the management API lists queue's consumer, as it
// lists an application's consumer that runs long before anyone replays:
// it lists a new one only from the broker's next statistics sample, and
// a replay judges copies taken with auto-ack by that list.
func listed(b *testing.B, queue string) {
	b.Helper()
	br, err := dlqamqp.New(dlqamqp.Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL})
	if err != nil {
		b.Fatalf("broker: %v", err)
	}
	defer func() { _ = br.Close() }()
	testkit.Eventually(b, time.Minute, "the management API to list the consumer of "+queue, func() bool {
		c, err := br.Counters(context.Background(), queue)
		return err == nil && c.Listed > 0
	})
}

// wait polls until the consumer has received n and returns when the last
// of them arrived.
func (c *autoAck) wait(b *testing.B, n int) time.Time {
	b.Helper()
	testkit.Eventually(b, 5*time.Minute, fmt.Sprintf("the consumer to receive %d", n), func() bool { return c.n.Load() >= int64(n) })
	return time.Unix(0, c.last.Load())
}

// filteredMove is the one-pass filtered mover: it reads the n messages of
// dlq once, republishes those that died in work to work with confirms (at
// most 500 unconfirmed), acks each original once its copy is confirmed,
// and gives the rest back with one nack(multiple, requeue) per channel
// after cancelling its consumers. It holds what it passes in windows of
// window deliveries, a channel and consumer each (the next consumer starts
// once a window has been delivered): RabbitMQ 3.10 pays for an ack by its
// own tag in proportion to what its channel holds. It returns how many it
// moved and how many deliveries it received from dlq.
func filteredMove(ctx context.Context, conn *amqp.Connection, dlq, work string, n, window int) (moved, read int, err error) {
	out, err := conn.Channel()
	if err != nil {
		return 0, 0, err
	}
	defer out.Close()
	if err := out.Confirm(false); err != nil {
		return 0, 0, err
	}
	type delivery struct {
		amqp.Delivery
		ch int
	}
	type reader struct {
		ch  *amqp.Channel
		tag string
		got int
	}
	var readers []*reader
	defer func() {
		for _, r := range readers {
			r.ch.Close()
		}
	}()
	merged := make(chan delivery, 1024)
	open := func() error {
		ch, err := conn.Channel()
		if err != nil {
			return err
		}
		r := &reader{ch: ch, tag: testkit.Name("mover")}
		readers = append(readers, r)
		if err := ch.Qos(window, 0, false); err != nil {
			return err
		}
		ds, err := ch.Consume(dlq, r.tag, false, false, false, false, nil)
		if err != nil {
			return err
		}
		k := len(readers) - 1
		go func() {
			for d := range ds {
				merged <- delivery{d, k}
			}
		}()
		return nil
	}
	if err := open(); err != nil {
		return 0, 0, err
	}
	type pending struct {
		dc  *amqp.DeferredConfirmation
		ch  int
		tag uint64
	}
	var flight []pending
	settle := func(wait int) error {
		for len(flight) > 0 {
			f := flight[0]
			if len(flight) <= wait {
				select {
				case <-f.dc.Done():
				default:
					return nil
				}
			}
			if ok, err := f.dc.WaitContext(ctx); err != nil || !ok {
				return fmt.Errorf("copy not confirmed: %v", err)
			}
			if err := readers[f.ch].ch.Ack(f.tag, false); err != nil {
				return err
			}
			flight = flight[1:]
		}
		return nil
	}
	for read < n {
		var d delivery
		select {
		case d = <-merged:
		case <-ctx.Done():
			return moved, read, ctx.Err()
		case <-time.After(time.Minute):
			return moved, read, errors.New("no delivery for a minute")
		}
		read++
		if r := readers[d.ch]; d.ch == len(readers)-1 {
			if r.got++; r.got == window && read < n {
				if err := open(); err != nil {
					return moved, read, err
				}
			}
		}
		if src, _ := d.Headers["x-first-death-queue"].(string); src != work {
			continue
		}
		dc, err := out.PublishWithDeferredConfirmWithContext(ctx, "", work, true, false, amqp.Publishing{
			Headers: d.Headers, ContentType: d.ContentType, DeliveryMode: d.DeliveryMode, MessageId: d.MessageId, Body: d.Body})
		if err != nil {
			return moved, read, err
		}
		flight = append(flight, pending{dc, d.ch, d.DeliveryTag})
		moved++
		if err := settle(500); err != nil {
			return moved, read, err
		}
	}
	if err := settle(0); err != nil {
		return moved, read, err
	}
	for _, r := range readers {
		if err := r.ch.Cancel(r.tag, false); err != nil {
			return moved, read, err
		}
	}
	for _, r := range readers {
		if err := r.ch.Nack(0, true, true); err != nil {
			return moved, read, err
		}
	}
	return moved, read, nil
}
