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
// currency — so replaying orders finishes and replaying payments stops,
// unless only its EUR failure group is replayed. Failures in that
// currency keep arriving in the DLQ while the demo runs.
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
	if err := d.arrive(ctx); err != nil {
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

// The demo's story in time: a deploy DeployAgo before the demo starts
// broke orders and payments (a burst of rejections right after it); a fix
// went out for both, except that payments still cannot handle currency
// XTS: those failures keep arriving, one every ArrivalEvery while the demo
// runs.
const (
	DeployAgo    = 2 * time.Hour
	ArrivalEvery = 45 * time.Second
)

// seed dead-letters 80 realistic failures straight into the DLQ, dated
// as they would be had they happened over the last two hours: 45 orders
// and 20 EUR payments rejected in a burst after the deploy (RabbitMQ's own
// x-death, backdated), 10 XTS payments moved there by the payments
// service's MassTransit error handling over the whole span — the last two
// minutes ago, so they are still arriving — and 5 Spring recoverer
// timeouts from orders, which record no failure time.
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
	now := time.Now().UTC()
	deploy := now.Add(-DeployAgo)
	publish := func(body any, headers amqp.Table, at time.Time) error {
		b, _ := json.Marshal(body)
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", d.q.DLQ, false, false, amqp.Publishing{
			MessageId: fmt.Sprintf("msg-%08x", rng.Uint32()), ContentType: "application/json",
			DeliveryMode: amqp.Persistent, Timestamp: at, Body: b, Headers: headers})
		if err != nil {
			return err
		}
		if ok, err := dc.WaitContext(context.Background()); err != nil || !ok {
			return fmt.Errorf("seed: publish not confirmed")
		}
		return nil
	}
	// The burst: most failures in the first minutes after the deploy, then
	// fewer, until the fix 35 minutes later.
	burst := func(i, n int) time.Time {
		f := float64(i) / float64(n)
		return deploy.Add(time.Minute + time.Duration(f*f*float64(34*time.Minute)) + time.Duration(rng.IntN(30))*time.Second)
	}
	for i := 0; i < 45; i++ {
		at := burst(i, 45)
		if err := publish(map[string]any{"order": 4100 + i, "sku": fmt.Sprintf("SKU-%03d", rng.IntN(300)), "qty": 1 + rng.IntN(4)},
			rejected(d.q.Orders, at), at); err != nil {
			return err
		}
	}
	for i := 0; i < 20; i++ {
		at := burst(i, 20)
		if err := publish(map[string]any{"payment": 9000 + i, "amount": 10 + rng.IntN(500), "currency": "EUR"}, rejected(d.q.Payments, at), at); err != nil {
			return err
		}
	}
	for i := 0; i < 10; i++ {
		at := deploy.Add(time.Duration(i+1) * (DeployAgo - 2*time.Minute) / 10)
		if err := publish(xtsPayment(9100+i, 10+rng.IntN(500)), d.xtsFault(at), at); err != nil {
			return err
		}
	}
	for i := 0; i < 5; i++ {
		h := amqp.Table{"x-original-exchange": "", "x-original-routingKey": d.q.Orders,
			"x-exception-message":    fmt.Sprintf("Inventory service timed out after 3000ms for order %d", 4200+i),
			"x-exception-stacktrace": "java.util.concurrent.TimeoutException: Inventory service timed out\n\tat com.shop.Inventory.reserve(Inventory.java:88)"}
		if err := publish(map[string]any{"order": 4200 + i, "sku": "SKU-777", "qty": 2}, h, now); err != nil {
			return err
		}
	}
	return nil
}

// rejected is what RabbitMQ writes on a message it dead-letters from
// queue at the given time.
func rejected(queue string, at time.Time) amqp.Table {
	return amqp.Table{
		"x-death": []any{amqp.Table{"queue": queue, "reason": "rejected", "count": int64(1), "time": at,
			"exchange": "", "routing-keys": []any{queue}}},
		"x-first-death-queue": queue, "x-first-death-reason": "rejected", "x-first-death-exchange": "",
	}
}

func xtsPayment(n, amount int) map[string]any {
	return map[string]any{"payment": n, "amount": amount, "currency": "XTS"}
}

// xtsFault is what the payments service's MassTransit error handling puts
// on a payment it could not handle at the given time.
func (d *Traffic) xtsFault(at time.Time) amqp.Table {
	return amqp.Table{
		"MT-Fault-ExceptionType": "System.NotSupportedException", "MT-Fault-Message": "Currency XTS is not supported",
		"MT-Fault-Timestamp": at.Format(time.RFC3339), "MT-Fault-InputAddress": "rabbitmq://localhost/" + d.q.Payments,
		"MT-Reason": "fault", "MT-Fault-RetryCount": int32(0),
	}
}

// arrive keeps XTS payment failures arriving in the DLQ, one every
// ArrivalEvery, until ctx ends.
func (d *Traffic) arrive(ctx context.Context) error {
	ch, err := d.conn.Channel()
	if err != nil {
		return err
	}
	go func() {
		defer ch.Close()
		tick := time.NewTicker(ArrivalEvery)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			at := time.Now().UTC()
			b, _ := json.Marshal(xtsPayment(9200+n, 10+n%400))
			_ = ch.PublishWithContext(ctx, "", d.q.DLQ, false, false, amqp.Publishing{
				MessageId: fmt.Sprintf("msg-xts-%d-%d", at.Unix(), n), ContentType: "application/json",
				DeliveryMode: amqp.Persistent, Timestamp: at, Body: b, Headers: d.xtsFault(at)})
		}
	}()
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
