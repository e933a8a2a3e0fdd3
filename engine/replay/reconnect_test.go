package replay_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	broker "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// stopAtOnce is fast with Reconnect off: a paced replay stops at a lost
// connection, as before clusters.
var stopAtOnce = func() replay.Config { c := fast; c.Tune.Reconnect = -1; return c }()

// eventLog records a replay's events.
type eventLog struct {
	mu sync.Mutex
	es []engine.Event
}

func (ev *eventLog) Notify(_ context.Context, e engine.Event) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.es = append(ev.es, e)
}

func (ev *eventLog) texts(kind engine.EventKind) []string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []string
	for _, e := range ev.es {
		if e.Kind == kind {
			out = append(out, e.Text)
		}
	}
	return out
}

// TestPacedReplayGoesOnAfterLosingItsConnection closes the replaying
// engine's broker connection in the middle of a paced replay, on both
// brokers, from a classic and a quorum DLQ. The same run must go on
// through a new connection, saying that it waits and then that it goes
// on, send its copies in doubt again (marked x-dlqbot-possible-duplicate)
// and finish, nothing missing, every sent copy judged settled; afterwards every original is at the
// consumer or in the DLQ, every copy the consumer got is in the ledger,
// and what the broker holds twice is the replay's duplicates (those with
// confirmed copies, exactly) or in doubt.
func TestPacedReplayGoesOnAfterLosingItsConnection(t *testing.T) {
	t.Parallel()
	eachDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		const (
			n    = 600
			rate = 150.0
		)
		ev := &eventLog{}
		f := newNotifiedFaultRun(t, on, dlqArgs, n, ev)
		arrived := timeArrivals(f.rec)
		done := f.runAndCut(t, n, rate, 150)
		var rep engine.Replay
		select {
		case rep = <-done:
		case <-time.After(3 * time.Minute):
			t.Fatal("the replay did not end within 3 minutes of the fault")
		}
		t.Logf("after the fault: state %s, sent %d, duplicates %d, in doubt %d, missing %d: %s", rep.State, rep.Sent, rep.Duplicates, rep.InDoubt, rep.Missing, rep.Note)
		// Its copies in doubt are sent again in the same run, marked.
		finished := rep.State == engine.StateFinished && rep.Sent == n && rep.InDoubt == 0 && !rep.ResendInDoubt
		if !finished || rep.Missing != 0 {
			t.Fatalf("the paced replay did not finish in the same run: state %s, sent %d of %d, in doubt %d, resent %d, missing %d: %s", rep.State, rep.Sent, n, rep.InDoubt, rep.Resent, rep.Missing, rep.Note)
		}
		waits := ev.texts(engine.EventWaiting)
		u, _ := url.Parse(on.AMQPURL)
		host := u.Host
		if len(waits) < 2 || !strings.Contains(waits[0], "lost the broker connection through node "+host) ||
			!strings.Contains(waits[len(waits)-1], "going on") {
			t.Errorf("waiting events %q; want the lost node %s named, then going on", waits, host)
		}
		if got := ev.texts(engine.EventStopped); finished && len(got) > 0 {
			t.Errorf("a stop was announced although the replay went on and finished: %q", got)
		}
		f.account(t, "after the fault", rep.ID)
		f.expectMarkedExtras(t, rep.ID)
		// The counted read after the reconnect made the counts the
		// broker's (reconcile.go), and the cut step was settled.
		f.expectCountedTwice(t, "after the fault", rep)
		if rep.Settled != rep.Sent {
			t.Errorf("settled %d of %d sent: the step the loss cut was not judged after the reconnect", rep.Settled, rep.Sent)
		}
		expectPacedAcross(t, arrived(), rate)
	})
}

// timeArrivals has rec's consumer note when it gets each delivery (and
// ack it); the function returned gives what it noted so far.
func timeArrivals(rec *recorder) func() []arrival {
	var (
		mu       sync.Mutex
		arrivals []arrival
	)
	rec.setThen(func(amqp.Delivery) string {
		now := time.Now()
		mu.Lock()
		arrivals = append(arrivals, arrival{before: now, after: now, ready: len(arrivals) + 1})
		mu.Unlock()
		return "ack"
	})
	return func() []arrival {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(arrivals)
	}
}

// expectPacedAcross checks that a replay at rate sent its copies at that
// rate before a lost connection and after it, the copies in doubt sent
// again included, counted where the consumer got them (arrivals,
// timeArrivals): a paced move's bound (worstStretch), with 250 ms of the
// rate more for the broker's jitter and three copies for the moves that
// began (the one cut, the resend, the rest).
func expectPacedAcross(t *testing.T, arrivals []arrival, rate float64) {
	t.Helper()
	const catch = 250 * time.Millisecond
	slack := int(rate*catch.Seconds()) + 3
	worst := worstStretch(arrivals, rate, catch, slack)
	if worst.got > worst.allowed {
		t.Errorf("faster than its rate across the lost connection: %s", worst.words(arrivals, rate, catch, slack))
		return
	}
	t.Logf("%d copies at rate %v across the lost connection; the closest stretch to the bound: %.0f copies in %v, %.1f allowed",
		len(arrivals), rate, worst.got, worst.span.Round(time.Millisecond), worst.allowed)
}

// newNotifiedFaultRun is newFaultRun with a notifier and the default
// Reconnect (a paced replay goes on).
func newNotifiedFaultRun(t *testing.T, on testkit.Broker, dlqArgs amqp.Table, n int, notifier engine.Notifier) *faultRun {
	t.Helper()
	connName := testkit.Name("conn")
	b, err := broker.New(broker.Config{URL: on.AMQPURL, ManagementURL: on.ManagementURL, ConnectionName: connName})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := replay.New(fast, replay.Deps{Broker: b, Mover: b, Counters: b, Tokens: st.Tokens(), Ledger: st.Ledger(), Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(),
		Jobs: st.Jobs(), Registry: st.Workers(), Notifier: notifier, Consumers: testkit.ConsumersOff{}, Watches: testkit.WatchesOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, Claims: testkit.ClaimsOff{}, TapGaps: testkit.TapOff{}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{rabbit: on.Dial(t), broker: b, store: st, svc: svc}
	src, dlq := e.rabbit.DeadLetteredAs(dlqArgs, n, 200)
	f := &faultRun{e: e, on: on, conn: connName, src: src, dlq: dlq, rec: &recorder{}}
	f.p = preview(t, e, engine.Selection{DLQ: dlq})
	testkit.Eventually(t, 20*time.Second, "the engine's connection in the management API", func() bool {
		return on.CountConnections(t, connName) > 0
	})
	for i := range n {
		f.originals = append(f.originals, fmt.Sprintf("m-%d", i))
	}
	e.rabbit.Consume(src, f.rec.handle)
	return f
}
