package testkit

import (
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Broker is one RabbitMQ the suite runs against.
type Broker struct {
	// Name is "rabbit3" (3.10, Debian bookworm's package), "rabbit4" (4.0,
	// Debian trixie's package) or "rabbit43" (4.3, Debian sid's package);
	// it names the subtests.
	Name          string
	AMQPURL       string
	ManagementURL string
	// Series is the broker's release line, "3.10", "4.0" or "4.3": what a
	// test expects of it where versions differ (see RequeueCounts).
	Series string
}

// The three brokers scripts/services.sh starts. AMQP_URL and
// RABBITMQ_MANAGEMENT_URL override the first; AMQP_URL_4 and
// RABBITMQ_MANAGEMENT_URL_4 the second; AMQP_URL_43 and
// RABBITMQ_MANAGEMENT_URL_43 the third.
var (
	Rabbit3 = Broker{Name: "rabbit3", AMQPURL: AMQPURL, ManagementURL: ManagementURL, Series: "3.10"}
	Rabbit4 = Broker{
		Name:          "rabbit4",
		AMQPURL:       env("AMQP_URL_4", "amqp://guest:guest@127.0.0.1:5673/"),
		ManagementURL: env("RABBITMQ_MANAGEMENT_URL_4", "http://guest:guest@127.0.0.1:15673"),
		Series:        "4.0",
	}
	Rabbit43 = Broker{
		Name:          "rabbit43",
		AMQPURL:       env("AMQP_URL_43", "amqp://guest:guest@127.0.0.1:5674/"),
		ManagementURL: env("RABBITMQ_MANAGEMENT_URL_43", "http://guest:guest@127.0.0.1:15674"),
		Series:        "4.3",
	}
)

// RequeueCounts reports whether b counts a give-back with
// basic.nack(requeue) against a quorum queue's delivery limit: RabbitMQ
// before 4.3 does, 4.3 counts only failed deliveries (reject, a lost
// channel).
func (b Broker) RequeueCounts() bool { return b.Series != "4.3" }

// ConfirmsBeforeClose reports whether b confirms the publishes it has read
// before it closes a connection it was told to close: RabbitMQ 4.3 does,
// so a connection closed during an unpaced replay leaves no copy in doubt
// there; earlier versions can leave some.
func (b Broker) ConfirmsBeforeClose() bool { return b.Series == "4.3" }

// DefaultDeliveryLimit is the delivery limit b gives a quorum queue that
// sets none: 20 from 4.0 on, none (0) on 3.x.
func (b Broker) DefaultDeliveryLimit() int {
	if b.Series == "3.10" {
		return 0
	}
	return 20
}

// Brokers returns the brokers a broker-dependent test runs on: all three,
// unless DLQBOT_RABBIT4=off leaves out both RabbitMQ 4 brokers (for a quick
// local run; make test and CI never set it).
func Brokers() []Broker {
	if os.Getenv("DLQBOT_RABBIT4") == "off" {
		return []Broker{Rabbit3}
	}
	return []Broker{Rabbit3, Rabbit4, Rabbit43}
}

// Named returns those of Brokers() called by one of names, in Brokers'
// order.
func Named(names ...string) []Broker {
	var out []Broker
	for _, b := range Brokers() {
		for _, n := range names {
			if b.Name == n {
				out = append(out, b)
				break
			}
		}
	}
	return out
}

// EachBroker runs f as one subtest per broker ("rabbit3", "rabbit4",
// "rabbit43"). A broker that does not answer fails the test with how to
// start it: the suite never skips a broker silently.
func EachBroker(t *testing.T, f func(t *testing.T, b Broker)) {
	t.Helper()
	EachBrokerIn(t, Brokers(), f)
}

// EachBrokerIn is EachBroker over bs only: for a long test that runs on
// some brokers, chosen where it is called (see Named).
func EachBrokerIn(t *testing.T, bs []Broker, f func(t *testing.T, b Broker)) {
	t.Helper()
	for _, b := range bs {
		t.Run(b.Name, func(t *testing.T) {
			b.require(t)
			f(t, b)
		})
	}
}

func (b Broker) require(t testing.TB) {
	t.Helper()
	u, err := url.Parse(b.AMQPURL)
	if err != nil {
		t.Fatalf("testkit: %s: bad AMQP URL: %v", b.Name, err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		t.Fatalf("testkit: %s (%s) does not answer: start it with scripts/services.sh all (or set DLQBOT_RABBIT4=off for a quick local run): %v", b.Name, u.Host, err)
	}
	_ = c.Close()
}

// Dial connects to b; the connection closes after the test.
func (b Broker) Dial(t testing.TB) *Rabbit {
	t.Helper()
	conn, err := amqp.Dial(b.AMQPURL)
	if err != nil {
		t.Fatalf("testkit: dial %s: %v", b.Name, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &Rabbit{t: t, Conn: conn, url: b.AMQPURL}
}

// Case is one subtest of a queue-type matrix: a kind of queue on a broker.
type Case struct {
	Kind   string
	Broker Broker
}

// Name names the subtest: "<kind>-<broker>".
func (c Case) Name() string { return c.Kind + "-" + c.Broker.Name }

// Matrix returns the cases for kinds of queue: a kind starting with
// "quorum" runs on every broker (Brokers), any other on RabbitMQ 3.10 only
// (on every broker with DLQBOT_CLASSIC_ALL=1, make test-all). Call Require
// on the case's broker first thing in its subtest.
func Matrix(kinds ...string) []Case {
	var out []Case
	for _, k := range kinds {
		if len(k) >= 6 && k[:6] == "quorum" || AllBrokers() {
			for _, b := range Brokers() {
				out = append(out, Case{Kind: k, Broker: b})
			}
			continue
		}
		out = append(out, Case{Kind: k, Broker: Rabbit3})
	}
	return out
}

// Require fails t, saying how to start it, when b does not answer.
func (b Broker) Require(t testing.TB) {
	t.Helper()
	b.require(t)
}
