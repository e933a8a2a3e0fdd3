package replay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	amqpad "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// worker is a consumer on its own connection, naming itself as a
// service's client does, that rejects every delivery (the bug).
type worker struct {
	conn *amqp.Connection
	name string
}

func startWorker(t *testing.T, b testkit.Broker, queue, name string) *worker {
	t.Helper()
	conn, err := amqp.DialConfig(b.AMQPURL, amqp.Config{Properties: amqp.Table{
		"product": "orders-service", "version": "1.4.2", "connection_name": name}})
	if err != nil {
		t.Fatalf("dial %s: %v", b.Name, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume %s: %v", queue, err)
	}
	go func() {
		for d := range ds {
			_ = d.Reject(false)
		}
	}()
	return &worker{conn: conn, name: name}
}

// listed polls the management API until queue's consumers include one on
// the connection named name with a date, and returns when it opened.
func listed(t *testing.T, e *env, queue, name string) time.Time {
	t.Helper()
	var at time.Time
	testkit.Eventually(t, 30*time.Second, "the management API to list "+name+" on "+queue, func() bool {
		cs, err := e.broker.QueueConsumers(context.Background(), queue)
		if err != nil {
			return false
		}
		for _, c := range cs {
			if c.ConnectionName == name && !c.ConnectedAt.IsZero() {
				at = c.ConnectedAt
				return true
			}
		}
		return false
	})
	return at
}

// pastSecond polls the clock until it is in a later second than t: a
// failure or a connection from then on is told apart from t at the one
// second resolution of death times.
func pastSecond(t *testing.T, at time.Time) {
	t.Helper()
	next := at.Truncate(time.Second).Add(time.Second)
	testkit.Eventually(t, 3*time.Second, "the clock to pass "+next.Format(time.RFC3339), func() bool { return !time.Now().Before(next) })
}

func targetOf(t *testing.T, p *engine.Preview, queue string) engine.TargetView {
	t.Helper()
	for _, tv := range p.Targets {
		if tv.Queue == queue {
			return tv
		}
	}
	t.Fatalf("preview %s has no target %s: %+v", p.Selection, queue, p.Targets)
	return engine.TargetView{}
}

// TestConsumersSinceFailure: a work queue whose one consumer (its own
// connection) rejected 50 messages into the DLQ previews as unchanged,
// its problem listed first, with the connection's time and the client's
// name and version; once the consumer reconnects (a new connection, in a
// later second than the failures) the next preview says restarted and the
// problem is gone; a Spring-style DLQ whose messages carry no failure time
// says unknown, and so does a preview whose management API hangs; a target
// without consumers says none.
func TestConsumersSinceFailure(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, b testkit.Broker) {
		t.Parallel()
		e := newEnvTuned(t, replay.Config{}, b, func(d *replay.Deps) { d.Consumers = d.Counters.(engine.ConsumerLister) })
		r := e.rabbit
		work, dlq := testkit.Name("work"), testkit.Name("dlq")
		r.Topology(work, dlq, nil)

		w1 := startWorker(t, b, work, testkit.Name("orders-worker"))
		opened := listed(t, e, work, w1.name)
		pastSecond(t, opened) // the failures come in a later second than the connection
		r.Publish(work, testkit.Msgs(50, 64)...)
		r.WaitCount(dlq, 50, 20*time.Second)

		p := preview(t, e, engine.Selection{DLQ: dlq})
		tv := targetOf(t, p, work)
		if tv.ConsumersSinceFailure != engine.SinceUnchanged || tv.LastFailure.IsZero() || tv.LastFailure.Before(opened.Truncate(time.Second)) {
			t.Fatalf("before the restart: %s since failure, last failure %s (connection opened %s); want unchanged", tv.ConsumersSinceFailure, tv.LastFailure, opened)
		}
		if len(tv.ConsumerConns) != 1 {
			t.Fatalf("consumer connections %+v, want 1", tv.ConsumerConns)
		}
		c := tv.ConsumerConns[0]
		if !c.ConnectedAt.Equal(opened) || c.Product != "orders-service" || c.Version != "1.4.2" || c.ConnectionName != w1.name {
			t.Errorf("consumer connection %+v, want opened %s by orders-service 1.4.2 named %s", c, opened, w1.name)
		}
		if len(p.Problems) == 0 || p.Problems[0].Kind != engine.ProblemConsumersUnchanged || p.Problems[0].Queue != work || p.Problems[0].Messages != 50 ||
			!strings.Contains(p.Problems[0].Detail, work+": its consumer has been connected since before these messages failed") ||
			!strings.Contains(p.Problems[0].Detail, "is the fix deployed?") {
			t.Fatalf("problems %+v: want %s on %s first", p.Problems, engine.ProblemConsumersUnchanged, work)
		}

		// The fix is deployed: the consumer comes back on a new connection.
		_ = w1.conn.Close()
		pastSecond(t, tv.LastFailure)
		w2 := startWorker(t, b, work, testkit.Name("orders-worker"))
		reopened := listed(t, e, work, w2.name)
		testkit.Eventually(t, 30*time.Second, "the management API to forget the old connection", func() bool {
			cs, err := e.broker.QueueConsumers(context.Background(), work)
			return err == nil && len(cs) == 1
		})
		p = preview(t, e, engine.Selection{DLQ: dlq})
		tv = targetOf(t, p, work)
		if tv.ConsumersSinceFailure != engine.SinceRestarted || len(tv.ConsumerConns) != 1 || !tv.ConsumerConns[0].ConnectedAt.Equal(reopened) {
			t.Fatalf("after the restart: %s since failure, connections %+v (reopened %s); want restarted", tv.ConsumersSinceFailure, tv.ConsumerConns, reopened)
		}
		for _, pr := range p.Problems {
			if pr.Kind == engine.ProblemConsumersUnchanged {
				t.Errorf("after the restart the preview still lists %+v", pr)
			}
		}

		// A management API that stopped answering: unknown, and the preview
		// goes on (twice: the second finds the node left alone).
		px, viaProxy := testkit.HangProxyFor(t, b.ManagementURL)
		hung, err := amqpad.New(amqpad.Config{URL: b.AMQPURL, ManagementURL: viaProxy, HTTPTimeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hung.Close() })
		px.Hang()
		stuck := newEnvTuned(t, replay.Config{}, b, func(d *replay.Deps) { d.Consumers = hung })
		for i := range 2 {
			if tv := targetOf(t, preview(t, stuck, engine.Selection{DLQ: dlq}), work); tv.ConsumersSinceFailure != engine.SinceUnknown || len(tv.ConsumerConns) != 0 {
				t.Errorf("management API hung, preview %d: %s since failure, connections %+v; want unknown", i+1, tv.ConsumersSinceFailure, tv.ConsumerConns)
			}
		}

		// Spring's recoverer republishes with the exception, no failure time.
		spring := testkit.Name("spring-dlq")
		r.Queue(spring, nil)
		var msgs []amqp.Publishing
		for i := range 5 {
			msgs = append(msgs, testkit.Msg(fmt.Sprintf("s-%d", i), []byte("{}"), amqp.Table{
				"x-original-exchange": "", "x-original-routingKey": work, "x-exception-message": "NullPointerException"}))
		}
		r.Publish(spring, msgs...)
		r.WaitCount(spring, 5, 10*time.Second)
		p = preview(t, e, engine.Selection{DLQ: spring})
		if tv := targetOf(t, p, work); tv.ConsumersSinceFailure != engine.SinceUnknown || !tv.LastFailure.IsZero() {
			t.Errorf("spring DLQ: %s since failure, last failure %s; want unknown, none", tv.ConsumersSinceFailure, tv.LastFailure)
		}

		// A target without consumers.
		idle := testkit.Name("idle")
		r.Queue(idle, nil)
		p = preview(t, e, engine.Selection{DLQ: dlq, To: idle})
		if tv := targetOf(t, p, idle); tv.ConsumersSinceFailure != engine.SinceNone {
			t.Errorf("target without consumers: %s since failure; want none", tv.ConsumersSinceFailure)
		}
	})
}
