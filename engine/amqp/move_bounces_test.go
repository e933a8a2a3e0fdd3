package amqp

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestBounceMatchesItsOwnCopy: two identical copies of one message (same
// message id, routing key and body) are in flight and only the second
// bounces (basic.return). The bounce must mark the second, not the first
// (before: the earliest look-alike was marked, so the bounced copy's original was
// acked — lost — and the delivered one's kept).
func TestBounceMatchesItsOwnCopy(t *testing.T) {
	body := []byte(`{"order":1}`)
	first := &inflight{h: held{d: amqp.Delivery{MessageId: "m-1", Body: body}}, key: "orders", tag: "r-1"}
	second := &inflight{h: held{d: amqp.Delivery{MessageId: "m-1", Body: body}}, key: "orders", tag: "r-2"}
	returns := make(chan amqp.Return, 2)
	m := &mover{bounces: returns, flight: []*inflight{first, second}, byCopy: map[string]*inflight{"r-1": first, "r-2": second}}
	returns <- amqp.Return{ReplyCode: 312, ReplyText: "NO_ROUTE", RoutingKey: "orders", MessageId: "m-1", Body: body,
		Headers: amqp.Table{copyHeader: "r-2"}}
	m.matchBounces()
	if first.bounced != nil || second.bounced == nil {
		t.Fatalf("bounce matched first=%v second=%v; want the second copy only", first.bounced != nil, second.bounced != nil)
	}
}

// TestMatchBouncesStopsOnAClosedChannel: the library closes the bounce
// (NotifyReturn) channel when the channel or connection is lost; matching must stop
// there, not read the closed channel forever.
func TestMatchBouncesStopsOnAClosedChannel(t *testing.T) {
	returns := make(chan amqp.Return)
	close(returns)
	m := &mover{bounces: returns}
	done := make(chan struct{})
	go func() { m.matchBounces(); m.matchBounces(); close(done) }()
	select {
	case <-done:
	case <-timeAfter(5):
		t.Fatal("matchBounces did not return on a closed bounce channel")
	}
}

func timeAfter(seconds int) <-chan time.Time { return time.After(time.Duration(seconds) * time.Second) }
