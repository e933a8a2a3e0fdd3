package testkit

import (
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Topology declares a DLQ and a source queue that dead-letters into it
// through the default exchange, both deleted after the test. dlqArgs are
// the DLQ's arguments (e.g. Quorum(nil)).
func (r *Rabbit) Topology(source, dlq string, dlqArgs amqp.Table) {
	r.t.Helper()
	r.Queue(dlq, dlqArgs)
	r.Queue(source, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
}

// Reject publishes msgs to source and rejects each (requeue=false) so the
// broker dead-letters them into source's DLQ with a real x-death.
func (r *Rabbit) Reject(source string, msgs ...amqp.Publishing) {
	r.t.Helper()
	r.Publish(source, msgs...)
	ch := r.Channel()
	defer func() { _ = ch.Close() }() // nothing stays held after the rejects
	if err := ch.Qos(len(msgs)+1, 0, false); err != nil {
		r.t.Fatalf("testkit: qos: %v", err)
	}
	tag := Name("rej")
	ds, err := ch.Consume(source, tag, false, false, false, false, nil)
	if err != nil {
		r.t.Fatalf("testkit: consume %s: %v", source, err)
	}
	for i := 0; i < len(msgs); i++ {
		select {
		case d := <-ds:
			if err := d.Reject(false); err != nil {
				r.t.Fatalf("testkit: reject: %v", err)
			}
		case <-time.After(30 * time.Second):
			r.t.Fatalf("testkit: only %d of %d messages arrived in %s", i, len(msgs), source)
		}
	}
	_ = ch.Cancel(tag, false)
}

// Expire publishes msgs to source with a 1 ms per-message TTL so the broker
// dead-letters them as expired (they expire at the head of the queue).
func (r *Rabbit) Expire(source string, msgs ...amqp.Publishing) {
	r.t.Helper()
	for i := range msgs {
		msgs[i].Expiration = "1"
	}
	r.Publish(source, msgs...)
}

// Handler decides what a test consumer does with a delivery: "ack",
// "reject" (requeue=false: dead-letter it) or "requeue".
type Handler func(d amqp.Delivery) string

// Consumer runs a consumer on queue until the test ends (or Stop), handing
// each delivery to h. It counts what it did.
type Consumer struct {
	mu       sync.Mutex
	Acked    int
	Rejected int
	ch       *amqp.Channel
	tag      string
	stopOnce sync.Once
	done     chan struct{}
}

// Consume starts a test consumer on queue with prefetch 50.
func (r *Rabbit) Consume(queue string, h Handler) *Consumer {
	r.t.Helper()
	ch, err := r.Conn.Channel()
	if err != nil {
		r.t.Fatalf("testkit: channel: %v", err)
	}
	if err := ch.Qos(50, 0, false); err != nil {
		r.t.Fatalf("testkit: qos: %v", err)
	}
	c := &Consumer{ch: ch, tag: Name("consumer"), done: make(chan struct{})}
	ds, err := ch.Consume(queue, c.tag, false, false, false, false, nil)
	if err != nil {
		r.t.Fatalf("testkit: consume %s: %v", queue, err)
	}
	go func() {
		defer close(c.done)
		for d := range ds {
			switch h(d) {
			case "reject":
				_ = d.Reject(false)
				c.mu.Lock()
				c.Rejected++
				c.mu.Unlock()
			case "requeue":
				_ = d.Nack(false, true)
			default:
				_ = d.Ack(false)
				c.mu.Lock()
				c.Acked++
				c.mu.Unlock()
			}
		}
	}()
	r.t.Cleanup(c.Stop)
	return c
}

// Counts returns how many deliveries were acked and rejected so far.
func (c *Consumer) Counts() (acked, rejected int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Acked, c.Rejected
}

// Stop cancels the consumer and closes its channel.
func (c *Consumer) Stop() {
	c.stopOnce.Do(func() {
		_ = c.ch.Cancel(c.tag, false)
		_ = c.ch.Close()
		<-c.done
	})
}

// Msg builds a persistent JSON message with id and headers.
func Msg(id string, body []byte, headers amqp.Table) amqp.Publishing {
	return amqp.Publishing{MessageId: id, Body: body, Headers: headers, DeliveryMode: amqp.Persistent, ContentType: "application/json"}
}

// Msgs builds n persistent 1 KB messages "m-<i>".
func Msgs(n, size int) []amqp.Publishing {
	out := make([]amqp.Publishing, n)
	for i := range out {
		out[i] = Msg(fmt.Sprintf("m-%d", i), Body(i, size), nil)
	}
	return out
}

// DeadLettered makes a source queue and its DLQ (both deleted after the
// test) and dead-letters n messages of size bytes from the source into the
// DLQ through the broker (Msgs(n, size), rejected), waiting until all are
// there.
func (r *Rabbit) DeadLettered(n, size int) (src, dlq string) {
	r.t.Helper()
	return r.DeadLetteredAs(nil, n, size)
}

// DeadLetteredAs is DeadLettered into a DLQ declared with dlqArgs (e.g.
// Quorum(nil)).
func (r *Rabbit) DeadLetteredAs(dlqArgs amqp.Table, n, size int) (src, dlq string) {
	r.t.Helper()
	src, dlq = Name("src"), Name("dlq")
	r.Topology(src, dlq, dlqArgs)
	r.Reject(src, Msgs(n, size)...)
	r.WaitCount(dlq, n, 30*time.Second)
	return src, dlq
}

// DeleteTapAfter deletes dlq's dlqbot tap ("dlqbot.tap.<dlq>"), if a
// replay or preview made one, after the test: a tap outlives its DLQ (it
// expires after 7 days unused).
func (r *Rabbit) DeleteTapAfter(dlq string) {
	r.t.Cleanup(func() { deleteQueueAt(r.url, "dlqbot.tap."+dlq) })
}

// DLXTopology declares a DLQ bound to a named direct exchange (a DLX) and a
// source queue that dead-letters through that exchange, as most
// applications do; the exchange, both queues and any dlqbot tap of the DLQ
// ("dlqbot.tap.<dlq>") are deleted after the test. It returns the
// exchange's name. Use PublishTo(r.Conn, exchange, dlq, …) to put a
// message into the DLQ through the exchange, as a framework's recoverer
// does.
func (r *Rabbit) DLXTopology(source, dlq string, dlqArgs amqp.Table) (exchange string) {
	r.t.Helper()
	exchange = Name("dlx")
	ch := r.Channel()
	if err := ch.ExchangeDeclare(exchange, "direct", true, false, false, false, nil); err != nil {
		r.t.Fatalf("testkit: declare exchange %s: %v", exchange, err)
	}
	r.t.Cleanup(func() { deleteExchangeAt(r.url, exchange) })
	r.Queue(dlq, dlqArgs)
	r.DeleteTapAfter(dlq)
	if err := ch.QueueBind(dlq, dlq, exchange, false, nil); err != nil {
		r.t.Fatalf("testkit: bind %s: %v", dlq, err)
	}
	r.Queue(source, amqp.Table{"x-dead-letter-exchange": exchange, "x-dead-letter-routing-key": dlq})
	return exchange
}

func deleteExchangeAt(amqpURL, name string) {
	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		return
	}
	defer conn.Close()
	if ch, err := conn.Channel(); err == nil {
		_ = ch.ExchangeDelete(name, false, false)
	}
}

// DeadLettersInto fills dlq with n dead letters of size bytes ("m-<i>", as
// Msgs) that look as the broker makes them: an x-death entry and the
// x-first-death-* headers naming source, rejected an hour ago. They are
// published straight into dlq with confirms, far quicker than making the
// broker dead-letter as many, and the call waits until dlq holds n. source
// need not exist.
func (r *Rabbit) DeadLettersInto(dlq, source string, n, size int) {
	r.t.Helper()
	died := time.Now().Add(-time.Hour).Truncate(time.Second)
	const batch = 10000
	for i := 0; i < n; i += batch {
		msgs := make([]amqp.Publishing, min(batch, n-i))
		for j := range msgs {
			msgs[j] = Msg(fmt.Sprintf("m-%d", i+j), Body(i+j, size), DeathHeaders(source, died))
		}
		r.Publish(dlq, msgs...)
	}
	r.WaitCount(dlq, n, 3*time.Minute)
}

// DeathHeaders are the headers the broker gives a message it dead-letters
// from source, rejected at died: one x-death entry and the x-first-death-*
// headers.
func DeathHeaders(source string, died time.Time) amqp.Table {
	return amqp.Table{
		"x-death": []any{amqp.Table{"queue": source, "reason": "rejected", "count": int64(1), "time": died,
			"exchange": "", "routing-keys": []any{source}}},
		"x-first-death-queue": source, "x-first-death-reason": "rejected", "x-first-death-exchange": "",
	}
}
