package interop_test

import (
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestInteropBrokerDeadLetters: consumers on npm's amqplib and Debian's
// python3-pika reject messages and the broker dead-letters them (x-death).
// dlqbot's preview, a replay to the still-failing consumer (every copy comes
// back, the replay stops, check counts them) and a replay to the fixed
// consumer (it receives every copy, byte for byte) are compared with what
// the consumers saw, on both brokers.
func TestInteropBrokerDeadLetters(t *testing.T) {
	t.Parallel()
	requireSetup(t)
	testkit.EachBroker(t, func(t *testing.T, b testkit.Broker) {
		for _, lib := range []string{"amqplib", "pika"} {
			t.Run(lib, func(t *testing.T) {
				t.Parallel()
				testBrokerDeadLetters(t, b, lib)
			})
		}
	})
}

func testBrokerDeadLetters(t *testing.T, b testkit.Broker, lib string) {
	const n = 8
	e := newEnv(t, b, fast)
	src, dlq := testkit.Name(lib), testkit.Name(lib+"-dlq")
	e.rabbit.Topology(src, dlq, nil)
	start := func(fail bool) *consumer {
		if lib == "pika" {
			return startPika(t, b, src, fail)
		}
		return startNode(t, b, map[string]any{"lib": "amqplib", "queue": src, "dlq": dlq, "fail": fail})
	}

	c := start(true)
	bodies := publishN(t, e.rabbit, src, n)
	e.rabbit.WaitCount(dlq, n, 60*time.Second)
	c.stop()
	tries := perMessage(c.handled(nil))
	if len(tries) != n {
		t.Fatalf("%s saw %d messages, want %d:\n%s", lib, len(tries), n, c.output())
	}

	p := e.preview(t, engine.Selection{DLQ: dlq, Reason: engine.ReasonRejected})
	if p.Scanned != n || p.Selected != n || len(p.Targets) != 1 || p.Targets[0].Queue != src || p.Targets[0].Reasons[engine.ReasonRejected] != n {
		t.Fatalf("preview: scanned %d, selected %d, targets %+v", p.Scanned, p.Selected, p.Targets)
	}
	for _, m := range p.Messages {
		if m.Dialect != engine.DialectRabbitMQ || m.Source != src || m.Reason != engine.ReasonRejected ||
			m.FailureGroup != string(engine.ReasonRejected) || m.Attempts != tries[m.MessageID] {
			t.Errorf("message %s (handled %d times): %+v", m.MessageID, tries[m.MessageID], m.Meta)
		}
	}
	if other := e.preview(t, engine.Selection{DLQ: dlq, Reason: engine.ReasonExpired}); other.Selected != 0 {
		t.Errorf("reason=expired selected %d", other.Selected)
	}

	c = start(true)
	r := e.replay(t, p.Token)
	if r.State != engine.StateStopped {
		t.Errorf("replay to a failing consumer: %s (%s), want stopped", r.State, r.Note)
	}
	e.rabbit.WaitCount(dlq, n, 60*time.Second)
	chk := e.checkUntil(t, r.ID, n)
	if chk.Returned != n || len(chk.Groups) != 1 || chk.Groups[0].Group != "rejected" || chk.NewFailures != 0 {
		t.Errorf("check: %+v", chk)
	}
	c.stop()
	for id, k := range perMessage(c.handled(func(ev event) bool { return ev.ReplayID == r.ID && ev.ReplayedFrom == src })) {
		if k != 1 {
			t.Errorf("copy %s handled %d times", id, k)
		}
	}
	if got := len(perMessage(c.handled(func(ev event) bool { return ev.ReplayID == r.ID }))); got != n {
		t.Errorf("%s saw %d of the %d replayed copies", lib, got, n)
	}

	c = start(false)
	p = e.preview(t, engine.Selection{DLQ: dlq})
	if p.Selected != n {
		t.Fatalf("second preview selected %d", p.Selected)
	}
	r = e.replay(t, p.Token)
	if r.State != engine.StateFinished || r.Sent != n || r.Returned != 0 {
		t.Errorf("replay to the fixed consumer: %s, %d sent, %d came back (%s)", r.State, r.Sent, r.Returned, r.Note)
	}
	e.rabbit.WaitCount(dlq, 0, 30*time.Second)
	e.rabbit.WaitCount(src, 0, 30*time.Second)
	c.stop()
	fixed := c.handled(func(ev event) bool { return ev.ReplayID == r.ID })
	for _, ev := range fixed {
		if ev.BodySHA256 != sha(bodies[ev.MessageID]) || ev.Failed || ev.HasXDeath || ev.ReplayCount != 2 {
			t.Errorf("fixed consumer got %+v", ev)
		}
	}
	if got := perMessage(fixed); len(got) != n || len(fixed) != n {
		t.Errorf("the fixed consumer got %d copies of %d messages, want %d of %d", len(fixed), len(got), n, n)
	}
}
