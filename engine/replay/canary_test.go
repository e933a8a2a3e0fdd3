package replay_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// events collects a replay's progress events.
type events struct {
	mu sync.Mutex
	es []engine.Event
}

func (ev *events) Notify(_ context.Context, e engine.Event) {
	ev.mu.Lock()
	ev.es = append(ev.es, e)
	ev.mu.Unlock()
}

func (ev *events) kinds() []engine.EventKind {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []engine.EventKind
	for _, e := range ev.es {
		out = append(out, e.Kind)
	}
	return out
}

func TestCanaryStopsWhenTheFirstStepComesBack(t *testing.T) {
	t.Parallel()
	ev := &events{}
	e := newEnvTuned(t, fast, testkit.Rabbit3, func(d *replay.Deps) { d.Notifier = ev })
	r := e.rabbit
	src, dlq := r.DeadLettered(50, 100)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	r.Consume(src, func(amqp.Delivery) string { return "reject" })

	rep := approveRun(t, e, p.Token, engine.Params{Timeout: 20 * time.Second, Rate: -1}, false)
	if rep.State != engine.StateStopped || rep.Sent != 10 || rep.Returned != 10 || rep.Step != 1 {
		t.Fatalf("replay %+v: want stopped after step 1 with 10 sent and 10 back", rep)
	}
	back := 0
	for _, f := range rep.Failures {
		if f.Kind == engine.FailureReturned {
			back++
			if f.Reason != string(engine.ReasonRejected) {
				t.Errorf("returned %s with reason %q, want rejected", f.ID, f.Reason)
			}
		}
	}
	if back != 10 {
		t.Fatalf("%d returned failures listed, want 10", back)
	}
	// 40 never sent + 10 came back.
	r.WaitCount(dlq, 50, 20*time.Second)
	k := ev.kinds()
	if k[0] != engine.EventStarted || k[len(k)-1] != engine.EventStopped {
		t.Fatalf("events %v: want started … stopped", k)
	}
}

func TestCanaryFinishesWithAHealthyConsumer(t *testing.T) {
	t.Parallel()
	ev := &events{}
	e := newEnvTuned(t, fast, testkit.Rabbit3, func(d *replay.Deps) { d.Notifier = ev })
	r := e.rabbit
	src, dlq := r.DeadLettered(75, 100)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	c := r.Consume(src, func(amqp.Delivery) string { return "ack" })

	rep := approveRun(t, e, p.Token, engine.Params{Step: 10, Cap: 40, Rate: -1, Timeout: 20 * time.Second}, false)
	if rep.State != engine.StateFinished || rep.Sent != 75 || rep.Settled != 75 || rep.Returned != 0 {
		t.Fatalf("replay %+v: want finished, 75 sent and settled", rep)
	}
	if rep.Step != 4 { // 10 + 20 + 40 + 5
		t.Fatalf("took %d steps, want 4 (10, 20, 40, 5)", rep.Step)
	}
	if acked, _ := c.Counts(); acked != 75 {
		t.Fatalf("consumer acked %d, want 75", acked)
	}
	passed := 0
	for _, k := range ev.kinds() {
		if k == engine.EventStepPassed {
			passed++
		}
	}
	if passed != 4 {
		t.Fatalf("%d step_passed events, want 4", passed)
	}
	if r.Count(dlq) != 0 {
		t.Fatalf("DLQ holds %d, want 0", r.Count(dlq))
	}
}

func TestCanaryStopsWhenNothingSettles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	r := e.rabbit
	src, dlq := r.DeadLettered(30, 100)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	rep := approveRun(t, e, p.Token, engine.Params{Rate: -1, Timeout: 2 * time.Second}, false)
	if rep.State != engine.StateStopped || rep.Sent != 10 || rep.Settled != 0 {
		t.Fatalf("replay %+v: want stopped after 10 sent, none settled", rep)
	}
	if !strings.Contains(rep.Note, "none of the 10 settled") {
		t.Fatalf("note %q does not say none settled", rep.Note)
	}
	r.WaitCount(src, 10, 10*time.Second)
	r.WaitCount(dlq, 20, 10*time.Second)
}

// TestCanaryFirstStepTakesTheFirstInDLQOrder checks that the first step
// sends the first messages in DLQ order when every other class lies past
// its bound (Config.CanaryDepth), so that it reads no deeper.
func TestCanaryFirstStepTakesTheFirstInDLQOrder(t *testing.T) {
	t.Parallel()
	cfg := fast
	cfg.CanaryDepth = 30 // the other classes start at 31
	e := newEnv(t, cfg)
	r := e.rabbit
	a, b, dlq := testkit.Name("a"), testkit.Name("b"), testkit.Name("dlq")
	r.Topology(a, dlq, nil)
	r.Queue(b, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	r.Reject(a, testkit.Msgs(30, 100)...) // 30 rejected from a, first in the DLQ
	var spring []amqp.Publishing
	for _, ex := range []string{"timeout calling payments", "order 17 not found", "order 99 not found"} {
		spring = append(spring, testkit.Msg("s-"+ex, []byte(ex), amqp.Table{"x-original-exchange": "", "x-original-routingKey": a, "x-exception-message": ex}))
	}
	r.Publish(dlq, spring...) // two failure groups from Spring, after the 30
	r.Expire(b, testkit.Msg("b-exp", []byte("b"), nil))
	r.WaitCount(dlq, 34, 20*time.Second)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	// Both consumers still fail every message: the copies come back, so
	// the replay stops by itself after its first step, and what the
	// consumers saw is exactly that step (no pause to race the sends).
	ra := &recorder{verdict: "reject"}
	r.Consume(a, ra.handle)
	rb := &recorder{verdict: "reject"}
	r.Consume(b, rb.handle)

	ctx := context.Background()
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Step: 5, Cap: 5, Rate: -1, Timeout: 10 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner")
	if err != nil {
		t.Fatal(err)
	}
	if rep.State != engine.StateStopped || rep.Step != 1 {
		t.Fatalf("state %s after step %d, want stopped after step 1 (its copies came back)", rep.State, rep.Step)
	}
	testkit.Eventually(t, 10*time.Second, "first step delivered", func() bool { return len(ra.got())+len(rb.got()) == rep.Sent })
	// The first step reads no further than its picks: the first five in
	// DLQ order, all of a's rejected ones. The other classes, past the
	// bound, go out one copy each in the step that reaches them
	// (engine/plan_test.go).
	got := ids(ra.got())
	for i := range 5 {
		if got[fmt.Sprintf("m-%d", i)] != 1 {
			t.Fatalf("first step sent %v to a: want m-0 … m-4, the first five in DLQ order", got)
		}
	}
	if len(got) != 5 || len(rb.got()) != 0 || rep.Sent != 5 {
		t.Fatalf("first step sent %d (%v) to a and %d to b, %d in all: want the first 5 in DLQ order, all to a", len(got), got, len(rb.got()), rep.Sent)
	}
}

func TestPauseResumeCancelStopSendingWithinASecond(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	r := e.rabbit
	src, dlq := r.DeadLettered(200, 100)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	var mu sync.Mutex
	var last time.Time
	r.Consume(src, func(amqp.Delivery) string {
		mu.Lock()
		last = time.Now()
		mu.Unlock()
		return "ack"
	})
	lastDelivery := func() time.Time { mu.Lock(); defer mu.Unlock(); return last }

	ctx := context.Background()
	prm := engine.Params{Step: 200, Cap: 200, Rate: 40, Timeout: 20 * time.Second}
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", prm, false)
	if err != nil {
		t.Fatal(err)
	}
	runDone := make(chan engine.Replay, 1)
	go func() { rep, _ := e.svc.Run(ctx, ap.Replay.ID, "owner"); runDone <- rep }()
	testkit.Eventually(t, 10*time.Second, "some sent", func() bool { return !lastDelivery().IsZero() })
	if _, err := e.svc.Control(ctx, ap.Replay.ID, engine.ControlPause, "U_PAUSER"); err != nil {
		t.Fatal(err)
	}
	asked := time.Now()
	rep := <-runDone
	if rep.State != engine.StatePaused {
		t.Fatalf("state %s, want paused", rep.State)
	}
	if d := lastDelivery().Sub(asked); d > time.Second {
		t.Fatalf("a copy was delivered %s after the pause", d)
	}
	if rep.Sent == 0 || rep.Sent >= 200 {
		t.Fatalf("sent %d: want a partial replay", rep.Sent)
	}
	r.WaitCount(dlq, 200-rep.Sent, 10*time.Second)

	// Resume: a worker would get the job; here the test runs it again.
	if _, err := e.svc.Control(ctx, ap.Replay.ID, engine.ControlResume, "U_RESUMER"); err != nil {
		t.Fatal(err)
	}
	go func() { rep, _ := e.svc.Run(ctx, ap.Replay.ID, "owner2"); runDone <- rep }()
	sentBefore := rep.Sent
	testkit.Eventually(t, 10*time.Second, "more sent after resume", func() bool {
		cur, _ := e.svc.Status(ctx, ap.Replay.ID)
		return cur.Sent > sentBefore
	})
	cr, err := e.svc.Control(ctx, ap.Replay.ID, engine.ControlCancel, "U_CANCELLER")
	if err != nil {
		t.Fatal(err)
	}
	d0, _, _ := e.store.Replays().Desired(ctx, ap.Replay.ID)
	t.Logf("DEBUG cancel: state %s sent %d desired %q", cr.State, cr.Sent, d0)
	asked = time.Now()
	rep = <-runDone
	if rep.State != engine.StateCancelled {
		t.Fatalf("state %s, want cancelled", rep.State)
	}
	if d := lastDelivery().Sub(asked); d > time.Second {
		t.Fatalf("a copy was delivered %s after the cancel", d)
	}
	if rep.Sent >= 200 {
		t.Fatalf("cancel came too late to test: all 200 sent")
	}
	r.WaitCount(dlq, 200-rep.Sent, 10*time.Second) // sent + remaining = total
	if _, err := e.svc.Control(ctx, ap.Replay.ID, engine.ControlResume, "U_RESUMER"); !errors.Is(err, engine.ErrNotControllable) {
		t.Fatalf("resume after cancel: %v, want ErrNotControllable", err)
	}
}

func TestOwnerThatLostItsLeaseStopsSending(t *testing.T) {
	t.Parallel()
	// The zombie's publishes are timed where it makes them (each publish
	// its move allowed), not where a consumer sees them: under load the
	// broker's delivery lags by more than the bound checked here.
	pubs := &publishClock{}
	e := newEnvTuned(t, fast, testkit.Rabbit3, func(d *replay.Deps) {
		d.Mover = timedMover{CursorMover: d.Mover.(engine.CursorMover), clock: pubs}
	})
	r := e.rabbit
	src, dlq := r.DeadLettered(100, 100)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	var got atomic.Int64
	r.Consume(src, func(amqp.Delivery) string { got.Add(1); return "ack" })

	ctx := context.Background()
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Step: 100, Cap: 100, Rate: 40, Timeout: 20 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { _, err := e.svc.Run(ctx, ap.Replay.ID, "zombie"); runDone <- err }()
	testkit.Eventually(t, 10*time.Second, "some sent", func() bool { return got.Load() > 0 })
	// Another process takes the lease (simulated: release it under the
	// owner, whose lease value is its run's token).
	held, err := e.store.Leases().Owner(ctx, ap.Replay.ID)
	if err != nil || !strings.HasPrefix(held, "zombie/") {
		t.Fatalf("lease held by %q (%v), want the zombie's run", held, err)
	}
	if err := e.store.Leases().Release(ctx, ap.Replay.ID, held); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := e.store.Leases().Acquire(ctx, ap.Replay.ID, "usurper", time.Minute); err != nil || !ok {
		t.Fatalf("usurper acquire: %v %v", ok, err)
	}
	taken := time.Now()
	if err := <-runDone; !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("zombie run ended with %v, want ErrLeaseLost", err)
	}
	last, n := pubs.last()
	if n >= 100 {
		t.Fatalf("the zombie published all %d copies: the lease swap came too late to test", n)
	}
	if d := last.Sub(taken); d > 200*time.Millisecond {
		t.Fatalf("zombie published %s after losing its lease", d)
	}
	// Every message is either delivered once or back in the DLQ, and what
	// the broker delivered is no more than the zombie was allowed to
	// publish (a batch its fence refused was never published).
	testkit.Eventually(t, time.Minute, "each message delivered or in the DLQ", func() bool { return got.Load()+int64(r.Count(dlq)) == 100 })
	if g := got.Load(); g > int64(n) {
		t.Fatalf("the consumer got %d copies; the zombie published at most %d", g, n)
	}
}

// publishClock records when a move last allowed a publish, and how many.
type publishClock struct {
	mu sync.Mutex
	at time.Time
	n  int
}

func (c *publishClock) tick() {
	c.mu.Lock()
	c.at, c.n = time.Now(), c.n+1
	c.mu.Unlock()
}

func (c *publishClock) last() (time.Time, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at, c.n
}

// timedMover times every publish a move's Continue allows.
type timedMover struct {
	engine.CursorMover
	clock *publishClock
}

func (m timedMover) timed(req engine.MoveRequest) engine.MoveRequest {
	next := req.Continue
	req.Continue = func() error {
		if next != nil {
			if err := next(); err != nil {
				return err
			}
		}
		m.clock.tick()
		return nil
	}
	return req
}

func (m timedMover) Move(ctx context.Context, req engine.MoveRequest) (engine.MoveResult, error) {
	return m.CursorMover.Move(ctx, m.timed(req))
}

func (m timedMover) OpenCursor(ctx context.Context, queue string) (engine.Cursor, error) {
	c, err := m.CursorMover.OpenCursor(ctx, queue)
	if err != nil {
		return nil, err
	}
	return timedCursor{Cursor: c, m: m}, nil
}

type timedCursor struct {
	engine.Cursor
	m timedMover
}

func (c timedCursor) Move(ctx context.Context, req engine.MoveRequest) (engine.MoveResult, error) {
	return c.Cursor.Move(ctx, c.m.timed(req))
}

// TestCanaryFirstStepSamplesEveryClass: a DLQ of 60 dead letters from
// alpha (its consumer fixed: it acks) followed by 5 from bravo (its
// consumer still rejects them, so they dead-letter back), default steps.
// The first step holds a copy of each class — bravo's first, 61 deep —
// within its 10 copies, so the replay stops after it: alpha's consumer
// got 9, bravo's 1, and the DLQ holds everything else and bravo's copy.
func TestCanaryFirstStepSamplesEveryClass(t *testing.T) {
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
			alpha, bravo, dlq := testkit.Name("alpha"), testkit.Name("bravo"), testkit.Name("dlq")
			r.Topology(alpha, dlq, args)
			r.Queue(bravo, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
			var as, bs []amqp.Publishing
			for i := range 60 {
				as = append(as, testkit.Msg(fmt.Sprintf("a-%02d", i), testkit.Body(i, 50), nil))
			}
			for i := range 5 {
				bs = append(bs, testkit.Msg(fmt.Sprintf("b-%d", i), testkit.Body(100+i, 50), nil))
			}
			r.Reject(alpha, as...)
			r.WaitCount(dlq, 60, 20*time.Second)
			r.Reject(bravo, bs...)
			r.WaitCount(dlq, 65, 20*time.Second)

			p := preview(t, e, engine.Selection{DLQ: dlq})
			if p.Selected != 65 || p.Classes != 2 || p.CanaryClasses != 2 || p.FirstStepDepth != 61 {
				t.Fatalf("preview: %d selected, first step covers %d of %d classes, %d deep; want 65, 2 of 2, 61",
					p.Selected, p.CanaryClasses, p.Classes, p.FirstStepDepth)
			}
			ra := &recorder{}
			r.Consume(alpha, ra.handle)
			rb := &recorder{verdict: "reject"}
			r.Consume(bravo, rb.handle)

			rep := approveRun(t, e, p.Token, engine.Params{Rate: -1, Timeout: 20 * time.Second}, false)
			if rep.State != engine.StateStopped || rep.Step != 1 || rep.Sent > engine.DefaultStep {
				t.Fatalf("replay %s after step %d with %d sent (%s): want stopped after step 1, at most %d sent",
					rep.State, rep.Step, rep.Sent, rep.Note, engine.DefaultStep)
			}
			testkit.Eventually(t, 20*time.Second, "the first step at the consumers", func() bool {
				return len(ra.got())+len(rb.got()) == rep.Sent
			})
			gotA, gotB := ids(ra.got()), ids(rb.got())
			if len(gotB) != 1 || gotB["b-0"] != 1 {
				t.Fatalf("bravo's consumer got %v, want its first message b-0 once", gotB)
			}
			for id := range gotA {
				if id >= "a-09" {
					t.Fatalf("alpha's consumer got %v: want the first ones in DLQ order (a-00 … a-08)", gotA)
				}
			}
			// What the DLQ holds: all but the copies alpha's consumer acked.
			left := ids(r.Drain(dlq, 65-len(gotA), 2*time.Second))
			want := map[string]int{}
			for _, m := range append(as, bs...) {
				if gotA[m.MessageId] == 0 {
					want[m.MessageId]++
				}
			}
			if !reflect.DeepEqual(left, want) {
				t.Fatalf("DLQ holds %v, want %v", left, want)
			}
		})
	}
}
