package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// AMQPURL and ManagementURL are the test broker (AMQP_URL and
// RABBITMQ_MANAGEMENT_URL override them).
var (
	AMQPURL       = env("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
	ManagementURL = env("RABBITMQ_MANAGEMENT_URL", "http://guest:guest@127.0.0.1:15672")
	RedisURL      = env("REDIS_URL", "redis://127.0.0.1:6379/0")
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Name returns a unique name with the given prefix: "t-<prefix>-<random>".
func Name(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "t-" + prefix + "-" + hex.EncodeToString(b[:])
}

// Rabbit is a test's connection to the broker.
type Rabbit struct {
	t    testing.TB
	Conn *amqp.Connection
	url  string // the broker's AMQP URL, for cleanups on a fresh connection
}

// Dial connects to the test broker; the connection closes after the test.
func Dial(t testing.TB) *Rabbit {
	t.Helper()
	conn, err := amqp.Dial(AMQPURL)
	if err != nil {
		t.Fatalf("testkit: dial %s: %v", AMQPURL, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &Rabbit{t: t, Conn: conn, url: AMQPURL}
}

// Channel opens a channel that closes after the test.
func (r *Rabbit) Channel() *amqp.Channel {
	r.t.Helper()
	ch, err := r.Conn.Channel()
	if err != nil {
		r.t.Fatalf("testkit: channel: %v", err)
	}
	r.t.Cleanup(func() { _ = ch.Close() })
	return ch
}

// Queue declares a durable queue with args and deletes it after the test
// (on a fresh connection, so it works whatever the test did to its own).
func (r *Rabbit) Queue(name string, args amqp.Table) string {
	r.t.Helper()
	ch := r.Channel()
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		r.t.Fatalf("testkit: declare %s: %v", name, err)
	}
	r.t.Cleanup(func() { deleteQueueAt(r.url, name) })
	return name
}

// QueueOf declares a queue as Queue does and fills it with Msgs(n, size)
// ("m-0" … "m-<n−1>"), returning once the broker counts all n ready.
func (r *Rabbit) QueueOf(name string, args amqp.Table, n, size int) string {
	r.t.Helper()
	q := r.Queue(name, args)
	r.Publish(q, Msgs(n, size)...)
	r.WaitCount(q, n, 20*time.Second)
	return q
}

// Quorum returns the arguments of a quorum queue (plus extra).
func Quorum(extra amqp.Table) amqp.Table {
	a := amqp.Table{"x-queue-type": "quorum"}
	for k, v := range extra {
		a[k] = v
	}
	return a
}

// DeleteQueue deletes a queue if it exists, ignoring errors.
func DeleteQueue(name string) { deleteQueueAt(AMQPURL, name) }

func deleteQueueAt(amqpURL, name string) {
	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		return
	}
	defer conn.Close()
	if ch, err := conn.Channel(); err == nil {
		_, _ = ch.QueueDelete(name, false, false, false)
	}
}

// Publish sends msgs to queue through the default exchange with publisher
// confirms, in a window of up to 1,000, and fails the test on any nack.
func (r *Rabbit) Publish(queue string, msgs ...amqp.Publishing) {
	r.t.Helper()
	if err := PublishTo(r.Conn, "", queue, msgs...); err != nil {
		r.t.Fatalf("testkit: publish to %s: %v", queue, err)
	}
}

// PublishTo publishes msgs to exchange/key with confirms on a new channel.
func PublishTo(conn *amqp.Connection, exchange, key string, msgs ...amqp.Publishing) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var pending []*amqp.DeferredConfirmation
	flush := func() error {
		for _, dc := range pending {
			ok, err := dc.WaitContext(ctx)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("broker nacked a publish")
			}
		}
		pending = pending[:0]
		return nil
	}
	for _, m := range msgs {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, m)
		if err != nil {
			return err
		}
		pending = append(pending, dc)
		if len(pending) >= 1000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// Take gets and acks n messages of queue (basic.get) on a channel of its
// own and returns that channel open: a channel's per-queue deliveries and
// acks reach the management statistics on the broker's own timer, and a
// channel closed right after its acks can leave them uncounted. Close it
// once the counters show what it took (it is closed at the test's end
// otherwise).
func (r *Rabbit) Take(queue string, n int) *amqp.Channel {
	r.t.Helper()
	ch, _ := r.TakeIDs(queue, n)
	return ch
}

// TakeIDs is Take, also returning the message ids it took, in order.
func (r *Rabbit) TakeIDs(queue string, n int) (*amqp.Channel, []string) {
	r.t.Helper()
	ch := r.Channel()
	ids := make([]string, 0, n)
	for i := range n {
		d, ok, err := ch.Get(queue, false)
		if err != nil || !ok {
			r.t.Fatalf("testkit: get %d of %d from %s: ok %v, %v", i+1, n, queue, ok, err)
		}
		if err := d.Ack(false); err != nil {
			r.t.Fatalf("testkit: ack %d of %d from %s: %v", i+1, n, queue, err)
		}
		ids = append(ids, d.MessageId)
	}
	return ch, ids
}

// Drain reads every message of queue destructively (consumer with acks)
// until it has want messages or nothing arrives for idle, and returns them
// in order. Use it at the end of a test to check a queue's exact contents.
// The channel is closed on return: the broker may have delivered more than
// want by then (its prefetch runs ahead of the count), and what was
// delivered but not taken must go back to the queue, not stay held unacked
// until the test ends (the queue's ready count would miss it).
func (r *Rabbit) Drain(queue string, want int, idle time.Duration) []amqp.Delivery {
	r.t.Helper()
	ch := r.Channel()
	defer func() { _ = ch.Close() }()
	if err := ch.Qos(1000, 0, false); err != nil {
		r.t.Fatalf("testkit: qos: %v", err)
	}
	tag := Name("drain")
	ds, err := ch.Consume(queue, tag, false, false, false, false, nil)
	if err != nil {
		r.t.Fatalf("testkit: consume %s: %v", queue, err)
	}
	var out []amqp.Delivery
	for want <= 0 || len(out) < want {
		select {
		case d, ok := <-ds:
			if !ok {
				return out
			}
			out = append(out, d)
			_ = d.Ack(false)
		case <-time.After(idle):
			_ = ch.Cancel(tag, false)
			return out
		}
	}
	_ = ch.Cancel(tag, false)
	return out
}

// Count returns queue's ready message count (passive declare).
func (r *Rabbit) Count(queue string) int {
	r.t.Helper()
	ch, err := r.Conn.Channel()
	if err != nil {
		r.t.Fatalf("testkit: channel: %v", err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		r.t.Fatalf("testkit: count %s: %v", queue, err)
	}
	return q.Messages
}

// Look returns queue's ready count and its consumer count (passive
// declare: exact and current, unlike the management API's samples).
func (r *Rabbit) Look(queue string) (ready, consumers int) {
	r.t.Helper()
	ch, err := r.Conn.Channel()
	if err != nil {
		r.t.Fatalf("testkit: channel: %v", err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		r.t.Fatalf("testkit: look at %s: %v", queue, err)
	}
	return q.Messages, q.Consumers
}

// countPatience multiplies WaitCount's bound (see there).
const countPatience = 3

// WaitCount polls until queue holds n ready messages.
func (r *Rabbit) WaitCount(queue string, n int, within time.Duration) {
	r.t.Helper()
	// A count the broker reaches goes on at once; the bound only ends a
	// wait for one it never reaches. Beside make test's other lanes on two
	// cores, the brokers took several times a test's bound (written for a
	// quiet machine) to apply dead-letterings and requeues: it is tripled.
	within *= countPatience
	Eventually(r.t, within, fmt.Sprintf("%s to hold %d messages", queue, n), func() bool { return r.Count(queue) == n })
}

// Eventually polls cond every 20ms until it holds or within passes.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

// Body returns a deterministic body of n bytes for message i.
func Body(i, n int) []byte {
	b := []byte(fmt.Sprintf(`{"order":%d,"pad":"`, i))
	for len(b) < n-2 {
		b = append(b, 'a'+byte(i%26))
	}
	return append(b, `"}`...)
}

// SafeName reports whether s looks like a testkit name (for cleanup asserts).
func SafeName(s string) bool { return strings.HasPrefix(s, "t-") }

// DeleteQueue deletes name on r's broker (on a fresh connection).
func (r *Rabbit) DeleteQueue(name string) { deleteQueueAt(r.url, name) }
