package interop_test

import (
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// rascalCase is one of rascal's recovery strategies, as the consumer
// configures it (testdata/node/consumer.js).
type rascalCase struct {
	strategy string
	// reason is the dead-letter reason dlqbot must report: forward
	// publishes to the DLQ itself (no x-death), the others end in a nack.
	reason engine.Reason
	// refusal: rascal marks the copy so that it nacks any redelivery
	// without a newer x-death before the handler runs.
	refusal bool
}

var rascalCases = []rascalCase{
	{"forward", engine.ReasonException, false},
	{"republish", engine.ReasonRejected, false},
	{"immediateNack", engine.ReasonRejected, true},
}

const rascalGroup = "E_DECLINED: payment <n> declined: card expired"

// TestInteropRascal dead-letters messages through a real rascal
// subscription with each recovery strategy, on both brokers, and compares
// dlqbot's preview, replay and check with what the rascal handler saw.
func TestInteropRascal(t *testing.T) {
	t.Parallel()
	requireSetup(t)
	testkit.EachBroker(t, func(t *testing.T, b testkit.Broker) {
		for _, rc := range rascalCases {
			t.Run(rc.strategy, func(t *testing.T) {
				t.Parallel()
				testRascal(t, b, rc)
			})
		}
	})
}

func testRascal(t *testing.T, b testkit.Broker, rc rascalCase) {
	const n = 10
	e := newEnv(t, b, fast)
	src, dlq := testkit.Name("rascal-"+strings.ToLower(rc.strategy)), testkit.Name("rascal-dlq")
	e.rabbit.Topology(src, dlq, nil)
	node := func(fail bool) *consumer {
		return startNode(t, b, map[string]any{"lib": "rascal", "queue": src, "dlq": dlq, "strategy": rc.strategy, "fail": fail})
	}

	// 1. A failing rascal handler dead-letters n real messages.
	c := node(true)
	bodies := publishN(t, e.rabbit, src, n)
	e.rabbit.WaitCount(dlq, n, 60*time.Second)
	c.stop()
	tries := perMessage(c.handled(nil))
	if len(tries) != n {
		t.Fatalf("the handler saw %d messages, want %d:\n%s", len(tries), n, c.output())
	}

	// 2. The preview says what rascal did: source, reason, attempts (what
	// the handler saw), the error group, and immediateNack's refusal.
	p := e.preview(t, engine.Selection{DLQ: dlq})
	if p.Scanned != n || p.Selected != n || len(p.Targets) != 1 || p.Targets[0].Queue != src {
		t.Fatalf("preview: scanned %d, selected %d, targets %+v; problems %+v", p.Scanned, p.Selected, p.Targets, p.Problems)
	}
	for _, m := range p.Messages {
		if m.Dialect != engine.DialectRascal || m.Source != src || m.Reason != rc.reason || m.FailureGroup != rascalGroup ||
			m.ExceptionType != "E_DECLINED" || !strings.HasSuffix(m.Exception, "declined: card expired") {
			t.Errorf("message %s: %+v", m.MessageID, m.Meta)
		}
		if m.Attempts != tries[m.MessageID] {
			t.Errorf("message %s: attempts %d, the handler saw it %d times", m.MessageID, m.Attempts, tries[m.MessageID])
		}
		if (m.Refusal != "") != rc.refusal {
			t.Errorf("message %s: refusal %q", m.MessageID, m.Refusal)
		}
	}
	refused := 0
	for _, pr := range p.Problems {
		if pr.Kind == engine.ProblemRetryState {
			refused = pr.Messages
		}
	}
	if rc.refusal && refused != n || !rc.refusal && refused != 0 {
		t.Errorf("preview problems %+v: want %s for %d messages: %v", p.Problems, engine.ProblemRetryState, n, rc.refusal)
	}

	// 3. A replay to a handler that still fails: the copies start fresh for
	// rascal (the handler runs, and republish retries them again), every one
	// comes back, the replay stops and check groups them by rascal's error.
	c = node(true)
	r := e.replay(t, p.Token)
	if r.State != engine.StateStopped {
		t.Errorf("replay to a failing handler: state %s (%s), want stopped", r.State, r.Note)
	}
	e.rabbit.WaitCount(dlq, n, 60*time.Second)
	chk := e.checkUntil(t, r.ID, n)
	if chk.Returned != n || len(chk.Groups) != 1 || chk.Groups[0].Group != rascalGroup || chk.Groups[0].Count != n {
		t.Errorf("check: %d returned, groups %+v", chk.Returned, chk.Groups)
	}
	c.stop()
	again := c.handled(func(ev event) bool { return ev.ReplayID == r.ID })
	if got := perMessage(again); len(got) != n {
		t.Errorf("the handler saw %d of the %d replayed messages:\n%s", len(got), n, c.output())
	} else {
		for id, k := range got {
			if k != tries[id] {
				t.Errorf("replayed %s: handler ran %d times, %d the first time (rascal's state was not reset)", id, k, tries[id])
			}
		}
	}
	for _, ev := range again {
		if ev.ReplayedFrom != src || ev.CC != nil {
			t.Errorf("copy %s: replayed_from %q, CC %v", ev.MessageID, ev.ReplayedFrom, ev.CC)
		}
	}

	// 4. Copies are byte-exact but for the documented headers: replay three
	// to a scratch queue and compare them with the DLQ's originals. Forward
	// adds a CC header (rascal names <queue>.<routing key>): the queue it
	// names exists from now on and gets nothing from the replays.
	orig := map[string]amqp.Delivery{}
	for _, d := range e.peek(t, dlq, n) {
		orig[d.MessageId] = d
	}
	var cc string
	if rc.strategy == "forward" {
		names, _ := orig["m-0"].Headers["CC"].([]any)
		if len(names) != 1 {
			t.Fatalf("rascal's forward wrote CC %v, want one name", names)
		}
		cc = e.rabbit.Queue(names[0].(string), nil)
	}
	scratch := e.rabbit.Queue(testkit.Name("rascal-scratch"), nil)
	rec := &recorder{}
	e.rabbit.Consume(scratch, rec.handle)
	p = e.preview(t, engine.Selection{DLQ: dlq, Limit: 3, To: scratch})
	r = e.replay(t, p.Token)
	if r.State != engine.StateFinished || r.Sent != 3 {
		t.Errorf("replay to scratch: %s, %d sent (%s)", r.State, r.Sent, r.Note)
	}
	testkit.Eventually(t, 30*time.Second, "3 copies in scratch", func() bool { return len(rec.got()) == 3 })
	for _, d := range rec.got() {
		sameCopy(t, orig[d.MessageId], d, r.ID, src)
	}

	// 5. A replay of the rest to a fixed handler finishes, and the handler
	// received every copy, byte for byte; nothing is left or lost.
	c = node(false)
	p = e.preview(t, engine.Selection{DLQ: dlq})
	if p.Selected != n-3 {
		t.Fatalf("preview of the rest: %d selected, want %d", p.Selected, n-3)
	}
	r = e.replay(t, p.Token)
	if r.State != engine.StateFinished || r.Sent != n-3 || r.Returned != 0 {
		t.Errorf("replay to a fixed handler: %s, %d sent, %d came back (%s)", r.State, r.Sent, r.Returned, r.Note)
	}
	e.rabbit.WaitCount(dlq, 0, 30*time.Second)
	e.rabbit.WaitCount(src, 0, 30*time.Second)
	c.stop()
	fixed := c.handled(func(ev event) bool { return ev.ReplayID == r.ID })
	seen := map[string]bool{}
	for _, d := range rec.got() {
		seen[d.MessageId] = true
	}
	for _, ev := range fixed {
		if ev.BodySHA256 != sha(bodies[ev.MessageID]) || ev.Failed || seen[ev.MessageID] {
			t.Errorf("fixed handler: %+v", ev)
		}
		seen[ev.MessageID] = true
	}
	if len(seen) != n || len(fixed) != n-3 {
		t.Errorf("accounted for %d of %d messages (%d handled by the fixed consumer): %v", len(seen), n, len(fixed), seen)
	}
	if cc != "" {
		if k := e.rabbit.Count(cc); k != 0 {
			t.Errorf("%s (named by rascal's CC) got %d copies", cc, k)
		}
	}
}
