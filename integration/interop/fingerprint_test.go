package interop_test

import (
	"context"
	"errors"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestTimelessCopiesKeepTheTokenExact: Spring's recoverer and rascal's
// forward record no failure time. On a quorum DLQ (where every read adds a
// delivery count) their ids stay the same from scan to scan, so a token
// approves them; and when a previewed copy went away and a later failure of
// the same message arrived (here: with a later timestamp), the approval
// reports the previewed copy gone instead of sending the newcomer in its
// place. A copy identical in every header and property (the rascal one,
// republished unchanged) cannot be told apart by anything RabbitMQ delivers:
// it keeps its id (docs/design.md, "Choices where the spec is silent").
func TestTimelessCopiesKeepTheTokenExact(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, b testkit.Broker) {
		t.Parallel()
		e := newEnv(t, b, fast)
		src, dlq := testkit.Name("timeless"), testkit.Name("timeless-dlq")
		e.rabbit.Queue(src, nil)
		e.rabbit.Queue(dlq, testkit.Quorum(nil))
		spring := func(ts time.Time) amqp.Publishing {
			m := testkit.Msg("s-1", []byte(`{"order":17}`), amqp.Table{"x-original-exchange": "", "x-original-routingKey": src,
				"x-exception-message": "order 17 declined", "x-exception-stacktrace": "com.acme.Declined: order 17 declined\n\tat com.acme.Pay.run(Pay.java:42)"})
			m.Timestamp = ts
			return m
		}
		forward := testkit.Msg("f-1", []byte(`{"order":18}`), amqp.Table{"rascal": amqp.Table{"originalQueue": src,
			"error": amqp.Table{"message": "declined", "code": "E_DECLINED"}, "recovery": amqp.Table{src: amqp.Table{"forwarded": int8(1)}}}})
		first := time.Unix(1764500000, 0)
		e.rabbit.Publish(dlq, spring(first), forward)
		e.rabbit.WaitCount(dlq, 2, 30*time.Second)

		ctx := context.Background()
		p1 := e.preview(t, engine.Selection{DLQ: dlq})
		p2 := e.preview(t, engine.Selection{DLQ: dlq})
		ids := func(p *engine.Preview) map[string]int {
			m := map[string]int{}
			for _, x := range p.Messages {
				m[x.ID] += x.Count
			}
			return m
		}
		if a, b := ids(p1), ids(p2); len(a) != 2 || len(b) != 2 || !sameIDs(a, b) {
			t.Fatalf("ids changed between scans of a quorum DLQ: %v then %v", a, b)
		}
		if _, changes, err := e.svc.Compare(ctx, p2.Token); err != nil || len(changes) != 0 {
			t.Fatalf("compare right after the preview: %v %+v", err, changes)
		}

		// The previewed Spring copy is consumed elsewhere; the same message
		// fails again later and is republished with its new timestamp.
		gone := e.rabbit.Drain(dlq, 2, 3*time.Second)
		if len(gone) != 2 {
			t.Fatalf("drained %d", len(gone))
		}
		e.rabbit.Publish(dlq, spring(first.Add(time.Minute)), forward)
		e.rabbit.WaitCount(dlq, 2, 30*time.Second)
		_, err := e.svc.ApproveConfirmed(ctx, p2.Token, "U_APP", "", oneStep, "")
		var changes []engine.Change
		if err == nil || !errors.Is(err, engine.ErrChanged) {
			t.Fatalf("approve after the previewed copy was replaced: %v, want ErrChanged", err)
		}
		_, changes, _ = e.svc.Compare(ctx, p2.Token)
		if len(changes) != 1 || changes[0].Kind != engine.ChangeMessagesGone || changes[0].Messages != 1 {
			t.Errorf("changes %+v: want the one Spring copy gone", changes)
		}
	})
}

func sameIDs(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
