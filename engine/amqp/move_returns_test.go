package amqp

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestReturnMatchesItsOwnCopy: two identical copies of one message (same
// message id, routing key and body) are in flight and only the second is
// returned. The return must mark the second, not the first (before: the
// earliest look-alike was marked, so the returned copy's original was
// acked — lost — and the delivered one's kept).
func TestReturnMatchesItsOwnCopy(t *testing.T) {
	body := []byte(`{"order":1}`)
	first := &inflight{h: held{d: amqp.Delivery{MessageId: "m-1", Body: body}}, key: "orders", tag: "r-1"}
	second := &inflight{h: held{d: amqp.Delivery{MessageId: "m-1", Body: body}}, key: "orders", tag: "r-2"}
	returns := make(chan amqp.Return, 2)
	m := &mover{returns: returns, flight: []*inflight{first, second}, byCopy: map[string]*inflight{"r-1": first, "r-2": second}}
	returns <- amqp.Return{ReplyCode: 312, ReplyText: "NO_ROUTE", RoutingKey: "orders", MessageId: "m-1", Body: body,
		Headers: amqp.Table{copyHeader: "r-2"}}
	m.matchReturns()
	if first.returned != nil || second.returned == nil {
		t.Fatalf("return matched first=%v second=%v; want the second copy only", first.returned != nil, second.returned != nil)
	}
}

// TestMatchReturnsStopsOnAClosedChannel: the library closes the return
// channel when the channel or connection is lost; matching must stop
// there, not read the closed channel forever.
func TestMatchReturnsStopsOnAClosedChannel(t *testing.T) {
	returns := make(chan amqp.Return)
	close(returns)
	m := &mover{returns: returns}
	done := make(chan struct{})
	go func() { m.matchReturns(); m.matchReturns(); close(done) }()
	select {
	case <-done:
	case <-timeAfter(5):
		t.Fatal("matchReturns did not return on a closed return channel")
	}
}

func timeAfter(seconds int) <-chan time.Time { return time.After(time.Duration(seconds) * time.Second) }
