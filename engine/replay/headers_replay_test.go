package replay_test

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestReplayCopyGoesToItsTargetOnly: a dead letter carrying a CC header
// naming another queue (rascal's forward recovery writes one) is replayed
// to its source only — the broker would route the copy to the queue CC
// names too — and the copy's stroma.dlq.replayed_from names the queue it
// failed in, not the DLQ. (The broker strips BCC on publish and CC when it
// dead-letters with a routing key, so the message is published to the DLQ
// as rascal does, with rascal's headers.)
func TestReplayCopyGoesToItsTargetOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	src, dlq := testkit.Name("cc-src"), testkit.Name("cc-dlq")
	e.rabbit.Topology(src, dlq, nil)
	cc := e.rabbit.Queue(testkit.Name("cc"), nil)
	e.rabbit.Publish(dlq, testkit.Msg("m-1", []byte(`{"n":1}`), amqp.Table{"CC": []any{cc},
		"rascal": amqp.Table{"originalQueue": src, "error": amqp.Table{"message": "boom"},
			"recovery": amqp.Table{src: amqp.Table{"forwarded": int8(1)}}}}))
	e.rabbit.WaitCount(dlq, 1, 30*time.Second)
	if got := len(e.rabbit.Drain(cc, 1, 5*time.Second)); got != 1 {
		t.Fatalf("the publish with CC reached %s %d times, want 1", cc, got)
	}

	rec := &recorder{}
	e.rabbit.Consume(src, rec.handle)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	r := approveRun(t, e, p.Token, oneStep, false)
	if r.State != engine.StateFinished || r.Sent != 1 {
		t.Fatalf("replay: %s, %d sent (%s)", r.State, r.Sent, r.Note)
	}
	testkit.Eventually(t, 10*time.Second, "the copy in "+src, func() bool { return len(rec.got()) == 1 })
	d := rec.got()[0]
	if got := d.Headers[engine.HeaderReplayedFrom]; got != src {
		t.Errorf("%s = %v, want the source %s", engine.HeaderReplayedFrom, got, src)
	}
	if _, ok := d.Headers["CC"]; ok {
		t.Error("the copy keeps CC")
	}
	// A copy routed by CC would be there by now: the one to src is.
	if n := e.rabbit.Count(cc); n != 0 {
		t.Errorf("%s, named by CC, got %d copies", cc, n)
	}
}
