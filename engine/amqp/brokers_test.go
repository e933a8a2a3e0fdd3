package amqp

import (
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/internal/testkit"
)

// queueCase is a kind of queue on one broker of the matrix.
type queueCase struct {
	name string
	args amqp.Table
	on   testkit.Broker
}

// onBrokers puts each kind of queue on the brokers it must be tested on:
// quorum queues on every broker (RabbitMQ 3.10, 4.0 and 4.3), others on 3.10.
func onBrokers(kinds []struct {
	name string
	args amqp.Table
}) []queueCase {
	var out []queueCase
	for _, k := range kinds {
		for _, on := range brokersFor(k.name) {
			out = append(out, queueCase{name: k.name, args: k.args, on: on})
		}
	}
	return out
}

// brokersFor is every broker for a quorum kind, RabbitMQ 3.10 otherwise.
func brokersFor(kind string) []testkit.Broker {
	if strings.HasPrefix(kind, "quorum") {
		return testkit.Brokers()
	}
	return []testkit.Broker{testkit.Rabbit3}
}

// newEnvOn is newEnv on one broker; it fails the test, saying how to start
// the broker, when it does not answer.
func newEnvOn(t testing.TB, on testkit.Broker) *testEnv {
	t.Helper()
	on.Require(t)
	conn, err := amqp.Dial(on.AMQPURL)
	if err != nil {
		t.Fatalf("dial %s: %v", on.Name, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &testEnv{t: t, conn: conn}
}

// onBroker points cfg at one broker.
func onBroker(on testkit.Broker, cfg Config) Config {
	cfg.URL, cfg.ManagementURL = on.AMQPURL, on.ManagementURL
	return cfg
}
