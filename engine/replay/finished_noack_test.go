package replay_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// noAckWords is what a step's observation adds when every consumer of its
// target took the copies with auto-ack (settle_noack.go).
const noAckWords = "every consumer of the target takes messages with auto-ack"

// autoAck is a consumer that takes every message with auto-ack (the
// broker counts each delivery acked), noting what it got and when the
// last delivery came.
type autoAck struct {
	mu   sync.Mutex
	got  map[string]int
	n    int
	last time.Time
}

func consumeNoAck(t *testing.T, r *testkit.Rabbit, queue string) *autoAck {
	t.Helper()
	ch := r.Channel()
	ds, err := ch.Consume(queue, testkit.Name("noack"), true, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume %s: %v", queue, err)
	}
	c := &autoAck{got: map[string]int{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d := range ds {
			c.mu.Lock()
			c.got[d.MessageId]++
			c.n++
			c.last = time.Now()
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = ch.Close(); <-done })
	return c
}

func (c *autoAck) count() (int, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.last
}

// finishedAt notes when a replay's finished event was emitted.
type finishedAt struct {
	mu sync.Mutex
	at time.Time
	ev engine.Event
}

func (f *finishedAt) Notify(_ context.Context, e engine.Event) {
	if e.Kind != engine.EventFinished && e.Kind != engine.EventStepPassed {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.Kind == engine.EventFinished {
		f.at = time.Now()
	} else {
		f.ev = e
	}
}

// TestAutoAckReplayFinishesOnceItsCopiesAreTaken: a whole unpaced replay
// whose target's consumer takes every copy with auto-ack says finished
// within a few seconds of the consumer's last delivery, on a DLQ bound to
// an exchange (returns through the tap) and on one fed through the
// default exchange (returns by reading the DLQ). The grace is 20 s here,
// and the counters' proof cannot end the step before it (a delivery with
// auto-ack never counts in the queue's ack counter), so a step that
// waited for either would take 20 s; the consumer's deliveries are the
// evidence instead (settle_noack.go). The broker agrees: the target and
// the DLQ are empty and the consumer got each id once.
func TestAutoAckReplayFinishesOnceItsCopiesAreTaken(t *testing.T) {
	t.Parallel()
	const n = 2000
	everyDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		on.Require(t)
		for _, fed := range []string{"dlx", "default-exchange"} {
			t.Run(fed, func(t *testing.T) {
				cfg := fast
				cfg.SettleGrace, cfg.SettlePoll = 20*time.Second, 250*time.Millisecond
				fin := &finishedAt{}
				e := newTapEnv(t, on, cfg, func(d *replay.Deps) { d.Notifier = fin })
				r := e.rabbit
				src, dlq := testkit.Name("src"), testkit.Name("dlq")
				if fed == "dlx" {
					r.DLXTopology(src, dlq, dlqArgs)
				} else {
					r.Topology(src, dlq, dlqArgs)
					r.DeleteTapAfter(dlq)
				}
				r.Reject(src, testkit.Msgs(n, 100)...)
				r.WaitCount(dlq, n, time.Minute)
				p := preview(t, &e.env, engine.Selection{DLQ: dlq})
				c := consumeNoAck(t, r, src)
				// The API lists a consumer from the broker's next statistics
				// sample on (an application's consumer is listed long before
				// a replay).
				testkit.Eventually(t, time.Minute, "the API to list the consumer of "+src, func() bool {
					cs, err := e.broker.Counters(context.Background(), src)
					return err == nil && cs.Listed == 1 && cs.NoAck == 1
				})

				rep := approveRun(t, &e.env, p.Token, engine.Params{Step: n, Cap: n, Rate: -1, Timeout: 2 * time.Minute}, false)
				if rep.State != engine.StateFinished || rep.Sent != n || rep.Settled != n || rep.Returned != 0 {
					t.Fatalf("replay %s: %d sent, %d settled, %d back (%s); want finished, all %d sent and settled",
						rep.State, rep.Sent, rep.Settled, rep.Returned, rep.Note, n)
				}
				testkit.Eventually(t, 30*time.Second, "the consumer to get every copy", func() bool {
					got, _ := c.count()
					return got >= n
				})
				got, last := c.count()
				fin.mu.Lock()
				finished, step := fin.at, fin.ev.Step
				fin.mu.Unlock()
				took := finished.Sub(last)
				t.Logf("finished %s after the consumer's last delivery (grace %s)", took.Round(time.Millisecond), cfg.SettleGrace)
				// A few seconds: the poll, the look for returns, the record.
				if finished.IsZero() || took > 4*time.Second {
					t.Errorf("finished %s after the last delivery; want within 4 s (the grace is %s)", took, cfg.SettleGrace)
				}
				if step == nil || step.Evidence != engine.EvidenceCounters || !strings.Contains(step.Observation, noAckWords) {
					t.Errorf("step: %+v; want judged on the consumers' auto-ack", step)
				}
				c.mu.Lock()
				for i := range n {
					if k := c.got[fmt.Sprintf("m-%d", i)]; k != 1 {
						t.Errorf("the consumer got m-%d %d time(s), want once", i, k)
					}
				}
				c.mu.Unlock()
				if got != n {
					t.Errorf("the consumer got %d deliveries, want %d", got, n)
				}
				if d, s := r.Count(dlq), r.Count(src); d != 0 || s != 0 {
					t.Fatalf("DLQ holds %d, target %d: want both empty", d, s)
				}
			})
		}
	})
}

// TestAConsumerThatAcksKeepsTheGrace: beside a consumer that auto-acks, a
// target with one that acks what it takes (and could still reject it) is
// not judged by its consumers: its step waits the grace (the counters'
// proof cannot match, the auto-ack deliveries not counting as acks), and
// the replay still finishes exact.
func TestAConsumerThatAcksKeepsTheGrace(t *testing.T) {
	t.Parallel()
	const n = 500
	testkit.Rabbit3.Require(t)
	cfg := fast
	cfg.SettleGrace, cfg.SettlePoll = 3*time.Second, 250*time.Millisecond
	fin := &finishedAt{}
	e := newTapEnv(t, testkit.Rabbit3, cfg, func(d *replay.Deps) { d.Notifier = fin })
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.DLXTopology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(n, 100)...)
	r.WaitCount(dlq, n, time.Minute)
	p := preview(t, &e.env, engine.Selection{DLQ: dlq})
	c := consumeNoAck(t, r, src)
	rc := &recorder{}
	acks := r.Consume(src, rc.handle)
	testkit.Eventually(t, time.Minute, "the API to list both consumers of "+src, func() bool {
		cs, err := e.broker.Counters(context.Background(), src)
		return err == nil && cs.Listed == 2
	})

	rep := approveRun(t, &e.env, p.Token, engine.Params{Step: n, Cap: n, Rate: -1, Timeout: 2 * time.Minute}, false)
	if rep.State != engine.StateFinished || rep.Sent != n || rep.Settled != n || rep.Returned != 0 {
		t.Fatalf("replay %s: %d sent, %d settled, %d back (%s); want finished, all %d sent and settled",
			rep.State, rep.Sent, rep.Settled, rep.Returned, rep.Note, n)
	}
	fin.mu.Lock()
	step := fin.ev.Step
	fin.mu.Unlock()
	if step == nil || strings.Contains(step.Observation, noAckWords) || step.Duration < cfg.SettleGrace {
		t.Errorf("step: %+v; want judged after its grace of %s, not on the consumers' auto-ack", step, cfg.SettleGrace)
	}
	testkit.Eventually(t, 30*time.Second, "the consumers to get every copy", func() bool {
		got, _ := c.count()
		return got+len(rc.got()) >= n
	})
	got := ids(rc.got())
	c.mu.Lock()
	for id, k := range c.got {
		got[id] += k
	}
	c.mu.Unlock()
	for i := range n {
		if k := got[fmt.Sprintf("m-%d", i)]; k != 1 {
			t.Errorf("the consumers got m-%d %d time(s), want once", i, k)
		}
	}
	if _, rejected := acks.Counts(); rejected != 0 {
		t.Errorf("the consumer that acks rejected %d", rejected)
	}
	if d, s := r.Count(dlq), r.Count(src); d != 0 || s != 0 {
		t.Fatalf("DLQ holds %d, target %d: want both empty", d, s)
	}
}
