package amqp

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/internal/testkit"
)

// testEnv gives a test its own admin connection to the real broker, used to
// declare, publish and verify independently of the code under test.
type testEnv struct {
	t    testing.TB
	conn *amqp.Connection
}

func newEnv(t testing.TB) *testEnv {
	t.Helper()
	conn, err := amqp.Dial(DefaultURL)
	if err != nil {
		t.Fatalf("dial RabbitMQ at %s: %v", DefaultURL, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &testEnv{t: t, conn: conn}
}

func (e *testEnv) channel() *amqp.Channel {
	e.t.Helper()
	ch, err := e.conn.Channel()
	if err != nil {
		e.t.Fatalf("open channel: %v", err)
	}
	return ch
}

// queue declares a durable queue with a unique name and deletes it when the
// test ends.
func (e *testEnv) queue(prefix string, args amqp.Table) string {
	e.t.Helper()
	name := prefix + "-" + randomID()[:10]
	ch := e.channel()
	defer ch.Close()
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		e.t.Fatalf("declare %s: %v", name, err)
	}
	e.t.Cleanup(func() {
		if ch, err := e.conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(name, false, false, false)
			ch.Close()
		}
	})
	return name
}

// publish sends msgs to queue through the default exchange with publisher
// confirms, keeping up to 1000 unconfirmed.
func (e *testEnv) publish(queue string, msgs []amqp.Publishing) {
	e.t.Helper()
	if err := publishConfirmed(e.conn, queue, msgs); err != nil {
		e.t.Fatalf("publish to %s: %v", queue, err)
	}
}

func publishConfirmed(conn *amqp.Connection, queue string, msgs []amqp.Publishing) error {
	return testkit.PublishTo(conn, "", queue, msgs...)
}

// readAll empties queue (basic.get with auto-ack) and returns what it held.
func (e *testEnv) readAll(queue string) []amqp.Delivery {
	e.t.Helper()
	ch := e.channel()
	defer ch.Close()
	var out []amqp.Delivery
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			e.t.Fatalf("get from %s: %v", queue, err)
		}
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

// ready is the queue's ready count by passive declare.
func (e *testEnv) ready(queue string) int {
	e.t.Helper()
	ch := e.channel()
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		e.t.Fatalf("passive declare %s: %v", queue, err)
	}
	return q.Messages
}

// waitReady polls until the queue's ready count is n (quorum queues apply
// requeues asynchronously).
func (e *testEnv) waitReady(queue string, n int) {
	e.t.Helper()
	// Giving back a million messages takes the broker minutes when loaded.
	within := time.Minute + time.Duration(n/1000)*time.Second
	eventually(e.t, within, fmt.Sprintf("%s to hold %d ready messages", queue, n), func() bool {
		return e.ready(queue) == n
	})
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// testMessages builds n messages with varied bodies, properties and headers
// (nested tables, arrays, x-death, timestamps, byte arrays).
func testMessages(n int) []amqp.Publishing {
	msgs := make([]amqp.Publishing, n)
	for i := range msgs {
		body := append(bytes.Repeat([]byte{byte('a' + i%26)}, i%97), fmt.Sprintf(" #%d \x00\xff", i)...)
		h := amqp.Table{
			"i":     int64(i),
			"name":  fmt.Sprintf("m-%d", i),
			"even":  i%2 == 0,
			"ratio": float64(i) / 7,
		}
		if i%3 == 0 {
			h["x-death"] = []any{amqp.Table{
				"queue": "orders", "reason": "rejected", "count": int64(i%5 + 1),
				"time": time.Unix(1700000000+int64(i), 0), "exchange": "",
				"routing-keys": []any{"orders"},
			}}
			h["x-first-death-queue"] = "orders"
		}
		if i%5 == 0 {
			h["x-exception-message"] = fmt.Sprintf("boom %d", i)
			h["nested"] = amqp.Table{"a": amqp.Table{"b": []any{int32(1), "two", amqp.Table{"c": true}}}}
		}
		if i%7 == 0 {
			h["raw"] = []byte{0, 1, 2, byte(i)}
		}
		p := amqp.Publishing{
			Headers:      h,
			ContentType:  []string{"application/json", "text/plain", ""}[i%3],
			DeliveryMode: amqp.Persistent,
			Body:         body,
		}
		if i%11 != 0 {
			p.MessageId = fmt.Sprintf("msg-%d", i)
		}
		if i%4 != 0 {
			p.Timestamp = time.Unix(1700000000+int64(i), 0)
		}
		msgs[i] = p
	}
	return msgs
}

// record is what a test keeps of a visited message.
type record struct {
	Seq         int
	MessageID   string
	ContentType string
	Timestamp   time.Time
	Body        []byte
	Headers     map[string]any
}

func recordOf(seq int, id, ct string, ts time.Time, body []byte, h map[string]any) record {
	return record{Seq: seq, MessageID: id, ContentType: ct, Timestamp: ts, Body: bytes.Clone(body), Headers: withoutDeliveryCount(h)}
}

// withoutDeliveryCount drops the quorum queue's x-delivery-count, which
// every requeue may raise before RabbitMQ 4.3, and x-acquired-count, which
// every requeue raises on 4.3.
func withoutDeliveryCount(h map[string]any) map[string]any {
	out := make(map[string]any, len(h))
	for k, v := range h {
		if k != "x-delivery-count" && k != "x-acquired-count" {
			out[k] = v
		}
	}
	return out
}

// verifyIntact waits for the queue to hold len(pubs) ready messages, reads
// them all destructively and checks they are pubs, in order, with the
// headers the scan saw (seen may cover a prefix).
func (e *testEnv) verifyIntact(queue string, pubs []amqp.Publishing, seen []record) {
	e.t.Helper()
	e.waitReady(queue, len(pubs))
	got := e.readAll(queue)
	if len(got) != len(pubs) {
		e.t.Fatalf("queue holds %d messages after the scan, want %d", len(got), len(pubs))
	}
	for i, d := range got {
		p := pubs[i]
		if d.MessageId != p.MessageId || !bytes.Equal(d.Body, p.Body) || d.ContentType != p.ContentType ||
			!d.Timestamp.Equal(p.Timestamp) {
			e.t.Fatalf("position %d after the scan holds message %q (body %.20q), want %q (body %.20q)",
				i, d.MessageId, d.Body, p.MessageId, p.Body)
		}
		if i < len(seen) {
			after := withoutDeliveryCount(fromTable(d.Headers))
			if !reflect.DeepEqual(after, seen[i].Headers) {
				e.t.Fatalf("position %d: headers after the scan %v, scan saw %v", i, after, seen[i].Headers)
			}
		}
	}
}

// checkSeen checks that a scan visited pubs[:len(seen)] in order, with the
// properties published and headers decoded into plain Go values.
func checkSeen(t testing.TB, pubs []amqp.Publishing, seen []record) {
	t.Helper()
	for i, r := range seen {
		p := pubs[i]
		if r.Seq != i || r.MessageID != p.MessageId || !bytes.Equal(r.Body, p.Body) ||
			r.ContentType != p.ContentType || !r.Timestamp.Equal(p.Timestamp) {
			t.Fatalf("visit %d saw seq %d id %q, want seq %d id %q (same body and properties)", i, r.Seq, r.MessageID, i, p.MessageId)
		}
		if r.Headers["i"] != int64(i) {
			t.Fatalf("visit %d: header i = %#v", i, r.Headers["i"])
		}
		if i%5 == 0 {
			nested, ok := r.Headers["nested"].(map[string]any)
			inner, ok2 := nested["a"].(map[string]any)
			arr, ok3 := inner["b"].([]any)
			if !ok || !ok2 || !ok3 || len(arr) != 3 {
				t.Fatalf("visit %d: nested header not converted to plain maps/slices: %#v", i, r.Headers["nested"])
			}
			if _, ok := arr[2].(map[string]any); !ok {
				t.Fatalf("visit %d: table inside array not converted: %#v", i, arr[2])
			}
		}
		if i%3 == 0 {
			deaths, ok := r.Headers["x-death"].([]any)
			if !ok || len(deaths) != 1 {
				t.Fatalf("visit %d: x-death = %#v", i, r.Headers["x-death"])
			}
			if _, ok := deaths[0].(map[string]any); !ok {
				t.Fatalf("visit %d: x-death entry is %T, want map[string]any", i, deaths[0])
			}
		}
	}
}

// testBroker returns a Broker on the local services, closed at the end.
func testBroker(t testing.TB, cfg Config) *Broker {
	t.Helper()
	b, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
