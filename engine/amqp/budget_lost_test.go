package amqp

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestReadStopsWhereALostConnectionWouldDrop: RabbitMQ 4.3 counts no
// give-back but counts a delivery lost with its connection (a node dying
// under a read) in x-delivery-count. A quorum queue with a delivery limit
// of 2 whose messages another client's lost connections left at count 1 is
// read whole (a lost read now would leave them at the limit, not past it);
// at count 2 the read stops at the first delivery, gives back what it
// holds, and nothing is dropped. The control: one more lost connection of
// a plain client and the broker drops every message.
func TestReadStopsWhereALostConnectionWouldDrop(t *testing.T) {
	t.Parallel()
	on := testkit.Rabbit43
	e := newEnvOn(t, on)
	q := e.queue("t-budget-lost", amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(2)})
	const n = 10
	e.publish(q, testMessages(n))
	b := testBroker(t, onBroker(on, Config{Prefetch: 2}))
	scan := func() (int, error) {
		visited := 0
		_, err := b.Scan(context.Background(), q, func(engine.Message) error { visited++; return nil })
		return visited, err
	}

	if c := e.loseWhileHeld(on, q, n); c != 0 {
		t.Fatalf("first delivery with x-delivery-count %d, want 0", c)
	}
	e.waitReady(q, n)
	if visited, err := scan(); err != nil || visited != n {
		t.Fatalf("at count 1 of 2: Scan = %v after %d, want all %d read", err, visited, n)
	}
	e.waitReady(q, n)
	if c := e.loseWhileHeld(on, q, n); c != 1 {
		t.Fatalf("after one lost connection and dlqbot's read the messages carry x-delivery-count %d, want 1 (the read's give-back costs nothing on 4.3)", c)
	}
	e.waitReady(q, n)

	visited, err := scan()
	var rbe *engine.ReadBudgetError
	if !errors.As(err, &rbe) || !rbe.Midway || !rbe.Failures || rbe.Count != 2 || rbe.Limit != 2 {
		t.Fatalf("at count 2 of 2: Scan = %v after %d, want stopped midway by the read budget (a lost connection would drop them)", err, visited)
	}
	if visited != 0 {
		t.Fatalf("visited %d messages a lost connection would drop", visited)
	}
	if !strings.Contains(err.Error(), "counts no give-back, but counts a delivery lost with its connection") {
		t.Fatalf("the refusal does not say what 4.3 counts: %v", err)
	}
	e.waitReady(q, n)

	// The control: one more lost delivery takes them past the limit.
	if c := e.loseWhileHeld(on, q, n); c != 2 {
		t.Fatalf("the messages carry x-delivery-count %d, want 2", c)
	}
	eventually(t, 30*time.Second, "the broker dropping them past the limit", func() bool { return e.ready(q) == 0 })
}

// loseWhileHeld takes all n messages of q through a connection of its own
// and closes that connection with them unacknowledged (what a node dying
// under a reader does); it returns the lowest x-delivery-count they
// arrived with.
func (e *testEnv) loseWhileHeld(on testkit.Broker, q string, n int) int {
	e.t.Helper()
	conn, err := amqp.Dial(on.AMQPURL)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := ch.Qos(n, 0, false); err != nil {
		e.t.Fatal(err)
	}
	ds, err := ch.Consume(q, "", false, false, false, false, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	low := -1
	timeout := time.After(30 * time.Second)
	for range n {
		select {
		case d := <-ds:
			if c := headerInt(d.Headers["x-delivery-count"]); low < 0 || c < low {
				low = c
			}
		case <-timeout:
			e.t.Fatalf("%s: fewer than %d deliveries within 30 s", q, n)
		}
	}
	return low
}
