package amqp

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestQueueConsumers: a queue's consumers each come with their
// connection's opening time and the names its client gives, whether
// QueueConsumers asks about the connections one by one (a few) or lists
// the vhost's connections once (more than oneByOne); a client name with a
// control character is left out.
func TestQueueConsumers(t *testing.T) {
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		e := newEnvOn(t, on)
		b := testBroker(t, onBroker(on, Config{}))
		for _, n := range []int{2, oneByOne + 2} {
			q := e.queue("consumers", nil)
			began := time.Now().Add(-time.Second) // connected_at has whole seconds on some brokers
			names := map[string]bool{}
			for i := range n {
				name := fmt.Sprintf("%s-worker-%d", q, i)
				props := amqp.Table{"product": "orders-service", "version": "2.0." + fmt.Sprint(i), "connection_name": name}
				if i == 0 {
					props["connection_name"] = "bad\x1b[2Jname"
				} else {
					names[name] = true
				}
				conn, err := amqp.DialConfig(on.AMQPURL, amqp.Config{Properties: props})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = conn.Close() })
				ch, err := conn.Channel()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ch.Consume(q, "", false, false, false, false, nil); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, 30*time.Second, fmt.Sprintf("%d dated consumers of %s", n, q), func() bool {
				cs, err := b.QueueConsumers(context.Background(), q)
				if err != nil || len(cs) != n {
					return false
				}
				named := 0
				for _, c := range cs {
					if c.ConnectedAt.Before(began) || c.ConnectedAt.After(time.Now().Add(time.Second)) || c.Product != "orders-service" {
						return false
					}
					if names[c.ConnectionName] {
						named++
					} else if c.ConnectionName != "" {
						t.Fatalf("connection name %q: want one of the workers', or none for the bad one", c.ConnectionName)
					}
				}
				return named == n-1
			})
		}
		if _, err := b.QueueConsumers(context.Background(), testkit.Name("missing")); !errors.Is(err, engine.ErrQueueNotFound) {
			t.Errorf("a missing queue's consumers: %v, want ErrQueueNotFound", err)
		}
	})
}
