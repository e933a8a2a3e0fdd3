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

func (idleTarget) Look(_ context.Context, q string) (engine.QueueInfo, error) {
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

// stalledTarget is idleTarget whose Look waits until release is closed.
type stalledTarget struct {
	idleTarget
	asked   chan struct{} // closed at the first Look
	release chan struct{}
}

func (s *stalledTarget) Look(ctx context.Context, q string) (engine.QueueInfo, error) {
	select {
	case <-s.asked:
	default:
		close(s.asked)
	}
	<-s.release
	return s.idleTarget.Look(ctx, q)
}

// TestALateSampleHoldsTheAutoPacedPublishes: while the sample of the
// targets an auto-paced run took beside its publishes is out for longer
// than the pacer trusts its last measure, the hook slows the publishes to
// one a second (engine.Pacer.RateSampling); once the sample is back, the
// pacer's own rate is too.
func TestALateSampleHoldsTheAutoPacedPublishes(t *testing.T) {
	ctx := context.Background()
	clk := &runClock{t: time.Unix(1000, 0)}
	st := &stalledTarget{asked: make(chan struct{}), release: make(chan struct{})}
	rn := &run{s: &Service{d: Deps{Clock: clk, Broker: st}}, r: engine.Replay{Params: engine.Params{}.WithDefaults()}}
	rate, hook := rn.paceOf(ctx)
	rn.pacedTarget("orders")
	if got := hook(); got != rate {
		t.Fatalf("the first publish, its sample begun: rate %v, want the pacer's %v", got, rate)
	}
	<-st.asked
	clk.t = clk.t.Add(time.Second)
	if got := hook(); got != rate {
		t.Fatalf("a sample out for 1 s: rate %v, want the pacer's %v", got, rate)
	}
	clk.t = clk.t.Add(time.Second)
	if got := hook(); got != engine.PacerMinRate {
		t.Fatalf("a sample out for 2 s: rate %v, want %v until it is back", got, engine.PacerMinRate)
	}
	if st, _ := rn.pace.Load().(string); !strings.Contains(st, "waiting for the target's count, asked 2s ago") {
		t.Fatalf("a sample out for 2 s: status %q, want it to say the publishes wait for it", st)
	}
	close(st.release)
	deadline := time.Now().Add(10 * time.Second)
	for got := hook(); got == engine.PacerMinRate; got = hook() {
		if time.Now().After(deadline) {
			t.Fatal("the sample, released, was never handed to the pacer")
		}
		runtime.Gosched()
	}
	if st, _ := rn.pace.Load().(string); !strings.HasPrefix(st, "pacing to the consumer") {
		t.Fatalf("the pacer's rate is back, but the sample was not handed over: status %q", st)
	}
}
