package replay

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// runClock is a clock only the test moves.
type runClock struct{ t time.Time }

func (c *runClock) Now() time.Time { return c.t }
func (c *runClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- c.t.Add(d)
	return ch
}

// idleTarget is a broker whose every target exists, empty, with one
// consumer: one that acknowledges whatever it is sent.
type idleTarget struct{ engine.Broker }

func (idleTarget) Inspect(_ context.Context, q string) (engine.QueueInfo, error) {
	return engine.QueueInfo{Name: q, Exists: true, Consumers: 1}, nil
}

// TestNoRateMeansPaceToTheConsumer: a replay approved with no rate (the
// zero Params every front end sends then) is paced to its consumers: it
// starts at DefaultRate and rises above it once its target is seen to
// keep up, and says so. A fixed rate=50 and rate=max are not paced.
func TestNoRateMeansPaceToTheConsumer(t *testing.T) {
	ctx := context.Background()
	clk := &runClock{t: time.Unix(1000, 0)}
	runOf := func(p engine.Params) *run {
		return &run{s: &Service{d: Deps{Clock: clk, Broker: idleTarget{}}}, r: engine.Replay{Params: p.WithDefaults()}}
	}

	rn := runOf(engine.Params{})
	if !rn.r.Params.Auto {
		t.Fatalf("no rate: params %+v, want rate=auto", rn.r.Params)
	}
	rate, hook := rn.paceOf(ctx)
	if hook == nil || rate != engine.DefaultRate {
		t.Fatalf("no rate: starts at %v, paced %v; want %v, paced", rate, hook != nil, engine.DefaultRate)
	}
	rn.pacedTarget("orders")
	for i := 0; i < 3; i++ { // three samples, 25 or more sent between each
		for j := 0; j < 25; j++ {
			rate = hook()
		}
		// The sample is taken beside the publishes: the publishes go on
		// until it is handed to the pacer (which then is not due again
		// until the clock moves).
		deadline := time.Now().Add(10 * time.Second)
		for rn.pacer.Due() {
			if time.Now().After(deadline) {
				t.Fatalf("no rate: sample %d never handed to the pacer", i+1)
			}
			runtime.Gosched()
			rate = hook()
		}
		clk.t = clk.t.Add(engine.PacerWindow)
	}
	rate = hook()
	if st, _ := rn.pace.Load().(string); rate <= engine.DefaultRate || !strings.HasPrefix(st, "pacing to the consumer") {
		t.Fatalf("no rate, idle consumer: rate %v, status %q; want above %v, pacing to the consumer", rate, st, engine.DefaultRate)
	}

	for _, p := range []engine.Params{{Rate: 50}, {Rate: -1}} {
		if rate, hook := runOf(p).paceOf(ctx); hook != nil || rate != max(p.Rate, 0) {
			t.Errorf("rate %v: starts at %v, paced %v; want %v, not paced", p.Rate, rate, hook != nil, max(p.Rate, 0))
		}
	}
}
