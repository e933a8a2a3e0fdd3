package amqp

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestAwaitGiveBacksEndsOnceTheyShow: AwaitGiveBacks returns once every
// queue this Broker gave messages back to shows them ready, as the next
// read of it would wait for — what the terminal does before it exits.
//   - After a scan of a queue of 3,000 (RabbitMQ applies a large requeue
//     after the read's channels closed, a quorum queue in bursts), a
//     passive declare counts all 3,000 ready the moment it returns: a
//     classic queue on 3.10, a quorum queue on 3.10, 4.0 and 4.3.
//   - Expecting 10 where 5 are ready, it does not return until the other 5
//     arrive, then returns nil and forgets the expectation.
//   - Expecting 1,000 where 10 are, it ends long before its deadline, once
//     the count has stalled and the management API gives no reason to
//     think the rest may still land, with an error naming the queue and
//     the count it expected.
func TestAwaitGiveBacksEndsOnceTheyShow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, qc := range onBrokers(queueTypes) {
		t.Run("after a scan/"+qc.name+"/"+qc.on.Name, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, qc.on)
			q := e.queue("t-giveback", qc.args)
			const n = 3000
			e.publish(q, testMessages(n))
			testkit.Eventually(t, 30*time.Second, "every message ready", func() bool { return e.ready(q) == n })
			b := testBroker(t, onBroker(qc.on, Config{}))
			if info, err := b.Scan(ctx, q, func(engine.Message) error { return nil }); err != nil || info.Read != n {
				t.Fatalf("Scan = %+v, %v; want %d read", info, err, n)
			}
			if err := b.AwaitGiveBacks(ctx); err != nil {
				t.Fatal(err)
			}
			if got := e.ready(q); got != n {
				t.Fatalf("right after AwaitGiveBacks the queue shows %d ready; want all %d given back", got, n)
			}
		})
	}
	t.Run("until they arrive", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		q := e.queue("t-giveback", nil)
		pubs := testMessages(10)
		e.publish(q, pubs[:5])
		b := testBroker(t, Config{SettleTimeout: 20 * time.Second})
		b.pending.expect(q, 10)
		done := make(chan error, 1)
		go func() { done <- b.AwaitGiveBacks(ctx) }()
		select {
		case err := <-done:
			t.Fatalf("AwaitGiveBacks returned (%v) with 5 of the 10 expected ready", err)
		default:
		}
		if err := publishConfirmed(e.conn, q, pubs[5:]); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("AwaitGiveBacks did not return within 30 s of the expected count showing")
		}
		if _, left := b.pending.all()[q]; left {
			t.Fatal("the expectation is still remembered after it was met")
		}
	})
	t.Run("never", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		q := e.queue("t-giveback", nil)
		e.publish(q, testMessages(10))
		b := testBroker(t, Config{SettleTimeout: 200 * time.Millisecond})
		b.pending.expect(q, 1000)
		start := time.Now()
		err := b.AwaitGiveBacks(ctx)
		if err == nil || !strings.Contains(err.Error(), q) || !strings.Contains(err.Error(), "1000") {
			t.Fatalf("AwaitGiveBacks = %v; want an error naming %s and the 1000 expected", err, q)
		}
		// A statistics interval is 5 s; StallTimeout is 2 minutes.
		if d := time.Since(start); d > 45*time.Second {
			t.Fatalf("AwaitGiveBacks waited %v for messages a management sample shows missing", d)
		}
	})
}
