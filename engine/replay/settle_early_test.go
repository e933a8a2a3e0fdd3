package replay_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// provenWords is what a step's observation adds when the target's counters
// proved its copies delivered and acked (settle_proof.go).
const provenWords = "the target's counters show every copy delivered and acked"

// defaultSteps10 is a selection the default steps send in ten: 10, 20, 40,
// 80, 160, 320 (the doubling), 500 (the first at the cap), then 500, 500
// and 70, past the canary phase.
const defaultSteps10 = 2200

// quietTarget waits until the management API's counters of q have caught
// up with the published messages a test dead-lettered from it (published
// and delivered n, nothing ready or unacknowledged), so that the first
// sample a replay reads of it can anchor its proof.
func quietTarget(t *testing.T, e *tapEnv, q string, n int) {
	t.Helper()
	// The broker can drop the last statistics of a channel that closes
	// (settle_proof.go): counters that stay below n, unchanged over a
	// minute of samples taken after the call, have caught up too.
	after := time.Now().Add(6 * time.Second)
	var last engine.QueueCounters
	var since time.Time
	testkit.Eventually(t, 5*time.Minute, "the counters of "+q+" to catch up", func() bool {
		c, err := e.broker.Counters(context.Background(), q)
		if err != nil || c.SampledAt.IsZero() || c.Ready != 0 || c.Unacked != 0 {
			return false
		}
		if c.Publish >= int64(n) && c.DeliverGet >= int64(n) {
			return true
		}
		if !c.SampledAt.After(after) {
			return false
		}
		if c.Publish != last.Publish || c.DeliverGet != last.DeliverGet || c.Ack != last.Ack {
			last, since = c, c.SampledAt
			return false
		}
		return c.SampledAt.Sub(since) >= time.Minute
	})
}

// passed returns the step_passed results by step, and the index in the
// events of each step's start and pass.
func passed(ev *events) (res map[int]engine.StepResult, started, passedAt map[int]int) {
	res, started, passedAt = map[int]engine.StepResult{}, map[int]int{}, map[int]int{}
	for i, x := range ev.snapshot() {
		if x.Step == nil {
			continue
		}
		switch x.Kind {
		case engine.EventStepStarted:
			started[x.Step.Step] = i
		case engine.EventStepPassed:
			res[x.Step.Step] = *x.Step
			passedAt[x.Step.Step] = i
		}
	}
	return res, started, passedAt
}

// TestUnpacedReplaySettlesItsStepsEarly: a whole unpaced replay with the
// default steps and a healthy consumer ends each step once the target's
// counters prove its copies delivered and acked, long before the grace (2
// minutes here, so that waiting it would show in every step's duration), and
// past the canary phase sends the next step before judging the last; the
// replay is exact against the consumer and the queues.
func TestUnpacedReplaySettlesItsStepsEarly(t *testing.T) {
	t.Parallel()
	everyDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		on.Require(t)
		cfg := fast
		// A grace of 2 minutes: a step that waited it would last that long
		// (a loaded machine makes the proof's few seconds longer, never
		// minutes).
		cfg.SettleGrace, cfg.SettlePoll, cfg.LeaseTTL = 2*time.Minute, 100*time.Millisecond, 15*time.Second
		cfg.Log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel) // why a target could not be proven
		ev := &events{}
		e := newTapEnv(t, on, cfg, func(d *replay.Deps) { d.Notifier = ev })
		r := e.rabbit
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.DLXTopology(src, dlq, dlqArgs)
		// Dead letters of src published to the DLQ as the broker writes
		// them, not rejected through src: the target's counters then start
		// at nothing, so the first sample a step reads of them counts
		// every publish before it. Messages rejected through src can show
		// in its counters only after that sample on a loaded broker, and
		// the step then waits its grace.
		fillFrom(r, dlq, src, defaultSteps10)
		quietTarget(t, e, src, 0)
		p := preview(t, &e.env, engine.Selection{DLQ: dlq})
		rc := &recorder{}
		c := r.Consume(src, rc.handle)

		rep := approveRun(t, &e.env, p.Token, engine.Params{Rate: -1, Timeout: 5 * time.Minute}, false)
		if rep.State != engine.StateFinished || rep.Sent != defaultSteps10 || rep.Settled != defaultSteps10 || rep.Returned != 0 || rep.Step != 10 {
			t.Fatalf("replay %s after step %d: %d sent, %d settled, %d back (%s); want finished after 10 steps, all %d sent and settled",
				rep.State, rep.Step, rep.Sent, rep.Settled, rep.Returned, rep.Note, defaultSteps10)
		}
		testkit.Eventually(t, 30*time.Second, "the consumer to get every copy", func() bool { return len(rc.got()) >= defaultSteps10 })
		got := ids(rc.got())
		for i := range defaultSteps10 {
			if got[fmt.Sprintf("m-%d", i)] != 1 {
				t.Fatalf("the consumer got m-%d %d time(s), want once", i, got[fmt.Sprintf("m-%d", i)])
			}
		}
		if acked, rejected := c.Counts(); len(got) != defaultSteps10 || acked != defaultSteps10 || rejected != 0 {
			t.Fatalf("consumer: %d distinct, %d acked, %d rejected; want %d, each once, acked", len(got), acked, rejected, defaultSteps10)
		}
		if d, s := r.Count(dlq), r.Count(src); d != 0 || s != 0 {
			t.Fatalf("DLQ holds %d, target %d: want both empty", d, s)
		}

		res, started, passedAt := passed(ev)
		for k := 1; k <= 10; k++ {
			st, ok := res[k]
			if !ok {
				t.Fatalf("no step_passed for step %d", k)
			}
			// Waiting the grace would make the step last at least 2 minutes.
			if st.Duration >= cfg.SettleGrace || !strings.Contains(st.Observation, provenWords) {
				t.Errorf("step %d took %s (grace %s): %q; want ended by the counters' proof", k, st.Duration, cfg.SettleGrace, st.Observation)
			}
			t.Logf("step %d: %d copies, %s", k, st.Sent, st.Duration.Round(10*time.Millisecond))
		}
		// The canary phase sends, then settles; step 8 on (the step before
		// had the cap's size) is judged while the next step sends.
		for k := 1; k <= 7; k++ {
			if started[k+1] < passedAt[k] {
				t.Errorf("step %d started before step %d passed: the canary phase must not overlap", k+1, k)
			}
		}
		for k := 8; k <= 9; k++ {
			if started[k+1] > passedAt[k] {
				t.Errorf("step %d started after step %d passed: want it sent while step %d settled", k+1, k, k)
			}
		}
	})
}

// TestStepsSettleEarlyOnATargetDeclaredAgain: the target was deleted and
// declared again after the adapter had read its counters, so the first
// sample of it before step 1 has lapsed (none of the counters its former
// self showed). The run waits for the broker's next sample instead of
// anchoring on it, and every step is still proven settled by the
// counters, sent once and consumed.
func TestStepsSettleEarlyOnATargetDeclaredAgain(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		on.Require(t)
		const n = 30 // steps of 10 and 20
		cfg := fast
		cfg.SettleGrace, cfg.SettlePoll, cfg.LeaseTTL = 2*time.Minute, 100*time.Millisecond, 15*time.Second
		cfg.Log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
		ev := &events{}
		e := newTapEnv(t, on, cfg, func(d *replay.Deps) { d.Notifier = ev })
		r := e.rabbit
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		dlx := r.DLXTopology(src, dlq, nil)
		r.Reject(src, testkit.Msgs(n, 100)...)
		r.WaitCount(dlq, n, time.Minute)
		quietTarget(t, e, src, n)
		// The first answer after the target is declared again must be
		// lapsed. Under load a 3.10 broker once answered that first look
		// with counters the adapter could not tell from the old queue's
		// (seen once in make test, never alone): the target is then
		// declared again, at most three times in all.
		for try := 1; ; try++ {
			r.DeleteQueue(src)
			r.Queue(src, amqp.Table{"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": dlq})
			c, err := e.broker.Counters(context.Background(), src)
			if err == nil && c.Lapsed {
				break
			}
			if try == 3 {
				t.Fatalf("counters of the target declared again: %+v, %v; want lapsed", c, err)
			}
			t.Logf("try %d: counters of the target declared again: %+v, %v; want lapsed: declaring it again", try, c, err)
			// Counters to lose: a message through it, seen by the adapter.
			// The broker can drop the statistics of a channel closed right
			// after its ack (4.3 under make test's load showed none three
			// times), so the taking channel stays open until the adapter
			// has seen them.
			if err := testkit.PublishTo(r.Conn, "", src, testkit.Msgs(1, 100)...); err != nil {
				t.Fatal(err)
			}
			ch := r.Take(src, 1)
			testkit.Eventually(t, 2*time.Minute, "the adapter to see the message taken from "+src, func() bool {
				c, err := e.broker.Counters(context.Background(), src)
				return err == nil && !c.Lapsed && c.DeliverGet >= 1 && c.Ack >= 1 && c.Ready == 0 && c.Unacked == 0
			})
			_ = ch.Close()
		}

		p := preview(t, &e.env, engine.Selection{DLQ: dlq})
		rc := &recorder{}
		r.Consume(src, rc.handle)
		rep := approveRun(t, &e.env, p.Token, engine.Params{Rate: -1, Timeout: 5 * time.Minute}, false)
		if rep.State != engine.StateFinished || rep.Sent != n || rep.Settled != n || rep.Returned != 0 || rep.Step != 2 {
			t.Fatalf("replay %s after step %d: %d sent, %d settled, %d back (%s); want finished after 2 steps, all %d sent and settled",
				rep.State, rep.Step, rep.Sent, rep.Settled, rep.Returned, rep.Note, n)
		}
		testkit.Eventually(t, 30*time.Second, "the consumer to get every copy", func() bool { return len(rc.got()) >= n })
		if got := ids(rc.got()); len(got) != n || len(rc.got()) != n {
			t.Fatalf("the consumer got %d copies of %d messages, want %d once each", len(rc.got()), len(got), n)
		}
		if d, s := r.Count(dlq), r.Count(src); d != 0 || s != 0 {
			t.Fatalf("DLQ holds %d, target %d: want both empty", d, s)
		}
		res, _, _ := passed(ev)
		for k := 1; k <= 2; k++ {
			if st := res[k]; st.Duration >= cfg.SettleGrace || !strings.Contains(st.Observation, provenWords) {
				t.Errorf("step %d took %s (grace %s): %q; want ended by the counters' proof", k, st.Duration, cfg.SettleGrace, st.Observation)
			}
		}
	})
}

// TestOverlappingReplayStopsWhenTheConsumerStartsRejecting: the consumer
// acks the canary phase (steps 1–7, 1,130 copies) and rejects everything
// after. Step 8 is judged while step 9 sends; its returns stop the replay
// by itself, with at most two caps out past the canary phase, and every
// count the replay states agrees with what the consumer received and what
// the DLQ holds.
func TestOverlappingReplayStopsWhenTheConsumerStartsRejecting(t *testing.T) {
	t.Parallel()
	everyDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		on.Require(t)
		const n, canary, cap = 3000, 1130, 500
		cfg := fast
		cfg.SettleGrace, cfg.LeaseTTL = 3*time.Second, 15*time.Second
		e := newTapEnv(t, on, cfg, nil)
		r := e.rabbit
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.DLXTopology(src, dlq, dlqArgs)
		r.Reject(src, testkit.Msgs(n, 100)...)
		r.WaitCount(dlq, n, time.Minute)
		p := preview(t, &e.env, engine.Selection{DLQ: dlq})
		var mu sync.Mutex
		delivered, rejected := 0, 0
		r.Consume(src, func(amqp.Delivery) string {
			mu.Lock()
			defer mu.Unlock()
			delivered++
			if delivered <= canary {
				return "ack"
			}
			rejected++
			return "reject"
		})
		counts := func() (int, int) { mu.Lock(); defer mu.Unlock(); return delivered, rejected }

		rep := approveRun(t, &e.env, p.Token, engine.Params{Rate: -1, Timeout: 2 * time.Minute}, false)
		if rep.State != engine.StateStopped || rep.Step != 9 {
			t.Fatalf("replay %s after step %d (%s): want stopped while step 9 was begun", rep.State, rep.Step, rep.Note)
		}
		if rep.Sent < canary+cap || rep.Sent > canary+2*cap {
			t.Fatalf("%d sent: want step 8's %d and at most one more cap past the %d of the canary phase", rep.Sent, cap, canary)
		}
		testkit.Eventually(t, 30*time.Second, "the consumer to get every copy sent", func() bool { d, _ := counts(); return d >= rep.Sent })
		d, rj := counts()
		if d != rep.Sent || rj != rep.Sent-canary {
			t.Fatalf("the consumer got %d and rejected %d; the replay says %d sent (%d past the canary phase)", d, rj, rep.Sent, rep.Sent-canary)
		}
		// The stop counts the returns seen by then (the consumer may still
		// be rejecting): never more than were rejected; a check counts
		// them all.
		if rep.Returned == 0 || rep.Returned > rj || rep.Settled != rep.Sent {
			t.Fatalf("replay: %d came back, %d settled; the consumer rejected %d of the %d sent", rep.Returned, rep.Settled, rj, rep.Sent)
		}
		// The DLQ holds what was never sent and every copy that came back.
		r.WaitCount(dlq, n-rep.Sent+rj, 30*time.Second)
		testkit.Eventually(t, 30*time.Second, "a check to count every rejected copy back", func() bool {
			c, err := e.svc.Check(context.Background(), rep.ID, "")
			return err == nil && c.Returned == rj && c.Replayed == rep.Sent
		})
		step9 := rep.Sent - canary - cap
		for _, w := range []string{
			fmt.Sprintf("%d came back to %s", rep.Returned, dlq),
			fmt.Sprintf("step 9, begun meanwhile, sent %d of %d (%d of them seen leaving the target queue)", step9, cap, step9),
		} {
			if !strings.Contains(rep.Note, w) {
				t.Errorf("note %q does not say %q", rep.Note, w)
			}
		}
		back := 0
		for _, f := range rep.Failures {
			if f.Kind == engine.FailureReturned {
				back++
			}
		}
		if back != min(rep.Returned, 200) {
			t.Errorf("%d returned failures listed, want %d", back, min(rep.Returned, 200))
		}
		t.Logf("stopped with %d sent (%d in step 9), %d back: %s", rep.Sent, step9, rep.Returned, rep.Note)
	})
}

// otherFirst is another publisher on a step's target that always comes
// first: before each move it publishes one message of its own to queue
// and waits until the test's consumer has it, so the message is delivered
// and acked after the step's anchor sample and before any of the step's
// copies on the same consumer channel. Every sample counting the copies'
// acks then counts it too, whatever the statistics' lag.
type otherFirst struct {
	engine.Mover
	conn  *testkit.Rabbit
	queue string
	rc    *recorder
	n     int
}

func (o *otherFirst) Move(ctx context.Context, req engine.MoveRequest) (engine.MoveResult, error) {
	o.n++
	id := fmt.Sprintf("other-%d", o.n)
	if err := testkit.PublishTo(o.conn.Conn, "", o.queue, testkit.Msg(id, []byte("x"), nil)); err != nil {
		return engine.MoveResult{}, fmt.Errorf("the other publisher: %w", err)
	}
	for deadline := time.Now().Add(time.Minute); ids(o.rc.got())[id] == 0; {
		if time.Now().After(deadline) {
			return engine.MoveResult{}, fmt.Errorf("the other publisher: %s not consumed within a minute", id)
		}
		time.Sleep(20 * time.Millisecond) // polling the consumer's record
	}
	return o.Mover.Move(ctx, req)
}

// TestStepsThatCannotBeProvenWaitTheGrace: where the counters cannot prove
// a step's copies consumed — another publisher on the target, or no
// management counters at all — every step waits the grace after its copies
// left the target, as before. The other publisher on every broker (each
// version's counters), the case without counters on one (testkit.ClassicOn:
// it reads none of the broker's).
func TestStepsThatCannotBeProvenWaitTheGrace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		publisher bool
		extra     func(*replay.Deps)
	}{
		{"another-publisher", true, nil},
		{"no-counters", false, func(d *replay.Deps) { d.Counters = testkit.CountersOff{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			brokers := testkit.Brokers()
			if !tc.publisher {
				brokers = testkit.ClassicOn(t.Name())
			}
			testkit.EachBrokerIn(t, brokers, func(t *testing.T, on testkit.Broker) {
				t.Parallel()
				on.Require(t)
				cfg := fast
				cfg.SettleGrace, cfg.LeaseTTL = 6*time.Second, 15*time.Second
				ev := &events{}
				src, dlq := testkit.Name("src"), testkit.Name("dlq")
				rc := &recorder{}
				var other *testkit.Rabbit
				if tc.publisher {
					other = on.Dial(t)
				}
				e := newTapEnv(t, on, cfg, func(d *replay.Deps) {
					d.Notifier = ev
					if tc.extra != nil {
						tc.extra(d)
					}
					if other != nil {
						d.Mover = &otherFirst{Mover: d.Mover, conn: other, queue: src, rc: rc}
					}
				})
				r := e.rabbit
				r.DLXTopology(src, dlq, nil)
				r.Reject(src, testkit.Msgs(20, 100)...)
				r.WaitCount(dlq, 20, time.Minute)
				quietTarget(t, e, src, 20)
				p := preview(t, &e.env, engine.Selection{DLQ: dlq})
				r.Consume(src, rc.handle)
				rep := approveRun(t, &e.env, p.Token, engine.Params{Step: 10, Cap: 10, Rate: -1, Timeout: time.Minute}, false)
				if rep.State != engine.StateFinished || rep.Sent != 20 || rep.Settled != 20 {
					t.Fatalf("replay %s: %d sent, %d settled (%s); want finished, 20 sent and settled", rep.State, rep.Sent, rep.Settled, rep.Note)
				}
				got := ids(rc.got())
				for i := range 20 {
					if got[fmt.Sprintf("m-%d", i)] != 1 {
						t.Fatalf("the consumer got m-%d %d time(s), want once", i, got[fmt.Sprintf("m-%d", i)])
					}
				}
				res, _, _ := passed(ev)
				for k := 1; k <= 2; k++ {
					st := res[k]
					if st.Duration < cfg.SettleGrace || strings.Contains(st.Observation, provenWords) {
						t.Errorf("step %d took %s (grace %s): %q; want the grace waited, nothing proven", k, st.Duration, cfg.SettleGrace, st.Observation)
					}
				}
			})
		})
	}
}
