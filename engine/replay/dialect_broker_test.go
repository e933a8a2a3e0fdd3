package replay_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestBrokerDeadLettersWithAppExceptionReplay: messages RabbitMQ
// dead-lettered itself (a consumer rejected them, requeue=false, on a queue
// with a dead-letter exchange) that also carry an application's
// x-exception-message are read by their x-death: the preview names their
// source queue and failure time and adds the exception, selects them all,
// and the replay brings each back to the source once, leaving the DLQ empty.
func TestBrokerDeadLettersWithAppExceptionReplay(t *testing.T) {
	t.Parallel()
	for _, c := range testkit.Matrix("classic", "quorum") {
		t.Run(c.Name(), func(t *testing.T) {
			t.Parallel()
			c.Broker.Require(t)
			var args amqp.Table
			if c.Kind != "classic" {
				args = testkit.Quorum(nil)
			}
			e := newEnvOn(t, fast, c.Broker)
			r := e.rabbit
			src, dlq := testkit.Name("src"), testkit.Name("dlq")
			r.DLXTopology(src, dlq, args)
			const n = 6
			msgs := make([]amqp.Publishing, n)
			want := map[string]int{}
			for i := range msgs {
				msgs[i] = testkit.Msg(fmt.Sprintf("m-%d", i), testkit.Body(i, 100),
					amqp.Table{"x-exception-message": fmt.Sprintf("order %d not found", 1000+i)})
				want[msgs[i].MessageId]++
			}
			r.Reject(src, msgs...)
			r.WaitCount(dlq, n, 20*time.Second)

			p := preview(t, e, engine.Selection{DLQ: dlq})
			if p.Selected != n {
				t.Fatalf("selected %d, want %d; problems %+v", p.Selected, n, p.Problems)
			}
			if len(p.Targets) != 1 || p.Targets[0].Queue != src {
				t.Fatalf("targets %+v, want only %s", p.Targets, src)
			}
			for _, m := range p.Messages {
				if m.Source != src || m.Dialect != engine.DialectRabbitMQ || m.LastDeath.IsZero() ||
					m.Exception == "" || m.FailureGroup != "order <n> not found" {
					t.Fatalf("message %s read as %+v, want source %s from x-death, a failure time and the exception", m.MessageID, m.Meta, src)
				}
			}

			rec := &recorder{}
			r.Consume(src, rec.handle)
			rep := approveRun(t, e, p.Token, oneStep, false)
			if rep.State != engine.StateFinished || rep.Sent != n {
				t.Fatalf("replay %+v, want finished with %d sent", rep, n)
			}
			testkit.Eventually(t, 20*time.Second, "every copy delivered to the source", func() bool { return len(rec.got()) >= n })
			if got := ids(rec.got()); !reflect.DeepEqual(got, want) {
				t.Fatalf("source queue got %v, want %v", got, want)
			}
			if left := r.Count(dlq); left != 0 {
				t.Fatalf("DLQ holds %d after the replay, want 0", left)
			}
		})
	}
}
