package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Queues names the demo's queues: two services dead-letter into one DLQ.
type Queues struct {
	DLQ, Orders, Payments string
}

// NewQueues names the queues under prefix ("demo" → demo.dlq, …).
func NewQueues(prefix string) Queues {
	return Queues{DLQ: prefix + ".dlq", Orders: prefix + ".orders", Payments: prefix + ".payments"}
}

// Traffic declares the demo topology, seeds the DLQ with realistic
// failures from two source queues, and runs their consumers: orders is
// healthy now (its bug was fixed), payments still rejects payments in one
// currency — so replaying orders finishes and replaying payments stops.
type Traffic struct {
	conn *amqp.Connection
	q    Queues
}

// StartTraffic connects, (re)declares and seeds the topology, and
// starts the consumers; they stop when ctx ends.
func StartTraffic(ctx context.Context, url string, q Queues) (*Traffic, error) {
	conn, err := amqp.DialConfig(url, amqp.Config{Properties: amqp.Table{"connection_name": "dlqbot-demo-traffic"}})
	if err != nil {
		return nil, err
	}
	d := &Traffic{conn: conn, q: q}
	if err := d.declare(); err != nil {
		conn.Close()
		return nil, err
	}
	if err := d.seed(); err != nil {
		conn.Close()
		return nil, err
	}
	if err := d.consume(ctx, d.q.Orders, func(amqp.Delivery) bool { return true }); err != nil {
		conn.Close()
		return nil, err
	}
	err = d.consume(ctx, d.q.Payments, func(m amqp.Delivery) bool { return !strings.Contains(string(m.Body), `"currency":"XTS"`) })
	if err != nil {
		conn.Close()
		return nil, err
	}
	go func() { <-ctx.Done(); conn.Close() }()
	return d, nil
}

func (d *Traffic) declare() error {
	ch, err := d.conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	// Start from a clean demo each time.
	for _, q := range []string{d.q.DLQ, d.q.Orders, d.q.Payments, d.q.DLQ + ".parking"} {
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			return fmt.Errorf("reset %s: %w", q, err)
		}
	}
	if _, err := ch.QueueDeclare(d.q.DLQ, true, false, false, false, nil); err != nil {
		return err
	}
	dlx := amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": d.q.DLQ}
	for _, q := range []string{d.q.Orders, d.q.Payments} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, dlx); err != nil {
			return err
		}
	}
	return nil
}

// seed dead-letters realistic failures: the broker rejects them from their
// source queues (so x-death is real), and a few arrive the way Spring's
// republishing recoverer sends them, with exception headers.
func (d *Traffic) seed() error {
	ch, err := d.conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(7, 7))
	publish := func(queue string, body any, headers amqp.Table) error {
		b, _ := json.Marshal(body)
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, false, false, amqp.Publishing{
			MessageId: fmt.Sprintf("msg-%08x", rng.Uint32()), ContentType: "application/json",
			DeliveryMode: amqp.Persistent, Timestamp: time.Now(), Body: b, Headers: headers})
		if err != nil {
			return err
		}
		if ok, err := dc.WaitContext(context.Background()); err != nil || !ok {
			return fmt.Errorf("seed: publish not confirmed")
		}
		return nil
	}
	// Orders rejected by yesterday's bug, and payments that failed.
	for i := 0; i < 45; i++ {
		if err := publish(d.q.Orders, map[string]any{"order": 4100 + i, "sku": fmt.Sprintf("SKU-%03d", rng.IntN(300)), "qty": 1 + rng.IntN(4)}, nil); err != nil {
			return err
		}
	}
	for i := 0; i < 30; i++ {
		cur := "EUR"
		if i%3 == 0 {
			cur = "XTS" // the payments service still cannot handle this one
		}
		if err := publish(d.q.Payments, map[string]any{"payment": 9000 + i, "amount": 10 + rng.IntN(500), "currency": cur}, nil); err != nil {
			return err
		}
	}
	if err := rejectAll(d.conn, d.q.Orders, 45); err != nil {
		return err
	}
	if err := rejectAll(d.conn, d.q.Payments, 30); err != nil {
		return err
	}
	// Spring-style failures straight into the DLQ.
	for i := 0; i < 5; i++ {
		h := amqp.Table{"x-original-exchange": "", "x-original-routingKey": d.q.Orders,
			"x-exception-message":    fmt.Sprintf("Inventory service timed out after 3000ms for order %d", 4200+i),
			"x-exception-stacktrace": "java.util.concurrent.TimeoutException: Inventory service timed out\n\tat com.shop.Inventory.reserve(Inventory.java:88)"}
		if err := publish(d.q.DLQ, map[string]any{"order": 4200 + i, "sku": "SKU-777", "qty": 2}, h); err != nil {
			return err
		}
	}
	return nil
}

// rejectAll takes n messages from queue and rejects them, so the broker
// dead-letters them with x-death.
func rejectAll(conn *amqp.Connection, queue string, n int) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Qos(n, 0, false); err != nil {
		return err
	}
	ds, err := ch.Consume(queue, "demo-seed", false, false, false, false, nil)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		select {
		case m := <-ds:
			if err := m.Reject(false); err != nil {
				return err
			}
		case <-time.After(10 * time.Second):
			return fmt.Errorf("seed: only %d of %d messages reached %s", i, n, queue)
		}
	}
	return ch.Cancel("demo-seed", false)
}

// consume runs a demo consumer on queue: ok decides ack or reject.
func (d *Traffic) consume(ctx context.Context, queue string, ok func(amqp.Delivery) bool) error {
	ch, err := d.conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Qos(20, 0, false); err != nil {
		return err
	}
	ds, err := ch.Consume(queue, "demo-"+queue, false, false, false, false, nil)
	if err != nil {
		return err
	}
	go func() {
		for m := range ds {
			time.Sleep(20 * time.Millisecond) // the demo service's work: makes progress visible
			if ok(m) {
				_ = m.Ack(false)
			} else {
				_ = m.Reject(false)
			}
		}
	}()
	return nil
}
