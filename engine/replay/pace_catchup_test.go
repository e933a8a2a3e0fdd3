package replay_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// stallingLedger is the real ledger, but the stallAt-th intent it is
// asked to write takes stall longer: a slow Redis, for which a paced
// move's publishes wait (a copy is never published before its intent).
type stallingLedger struct {
	engine.Ledger
	stallAt int64
	stall   time.Duration
	calls   atomic.Int64
}

func (l *stallingLedger) IntendWindow(ctx context.Context, w engine.Window) (map[string]string, error) {
	if l.calls.Add(1) == l.stallAt {
		select {
		case <-ctx.Done():
		case <-time.After(l.stall): // the fault itself, not a wait for something
		}
	}
	return l.Ledger.IntendWindow(ctx, w)
}

// arrival is one sample of how many copies reached the target: its ready
// count by a passive declare sent at before and answered at after, or a
// consumer's count of deliveries at the instant it got one (before and
// after the same).
type arrival struct {
	before, after time.Time
	ready         int
}

// stretch is the stretch of time from arrivals[i] to arrivals[j]: got
// copies arrived in it, allowed by the pace's bound, over span (the
// longest it may have been: from the first sample's sending to the
// second's answer).
type stretch struct {
	i, j         int
	got, allowed float64
	span         time.Duration
}

// worstStretch is the stretch between two of arrivals closest to, or
// furthest over, the bound a paced move keeps (engine/amqp/move.go,
// paceCatchUp): (t + catch) × rate + 1, plus slack copies for the
// broker's own jitter.
func worstStretch(arrivals []arrival, rate float64, catch time.Duration, slack int) stretch {
	worst := stretch{got: math.Inf(-1)}
	for i := range arrivals {
		for j := i + 1; j < len(arrivals); j++ {
			span := arrivals[j].after.Sub(arrivals[i].before)
			st := stretch{i: i, j: j, span: span, got: float64(arrivals[j].ready - arrivals[i].ready),
				allowed: (span+catch).Seconds()*rate + 1 + float64(slack)}
			if st.got-st.allowed > worst.got-worst.allowed {
				worst = st
			}
		}
	}
	return worst
}

// words says where st lies in arrivals, against the bound.
func (st stretch) words(arrivals []arrival, rate float64, catch time.Duration, slack int) string {
	return fmt.Sprintf("%v into the replay, from a sample of %d copies to one of %d: %.0f arrived in %v, %.1f allowed ((t + %v) × %v + 1 + %d)",
		arrivals[st.j].after.Sub(arrivals[0].before).Round(time.Millisecond), arrivals[st.i].ready, arrivals[st.j].ready,
		st.got, st.span.Round(time.Millisecond), st.allowed, catch, rate, slack)
}

// TestAPacedReplayCatchesUpWithinItsBound holds a paced move's catch-up
// (engine/amqp/move.go, paceCatchUp) to what docs/using.md says of it,
// against the broker: a replay at rate=100 whose intent writes stall once
// for a second (stallingLedger) sends no faster, over any stretch of time
// t, than (t + 250 ms) × 100 + 1 copies, as counted in the target's ready
// count (the target has no consumer while the copies arrive, sampled by
// passive declare every 10 ms); and the stall did hold the copies back
// (the count stood still for at least 600 ms before all had arrived).
// The allowance adds 25 copies (250 ms at the rate) for the broker's own
// jitter in taking in the copies, which beside make test's other lanes
// can hold a channel's frames that long; a move that made up the whole
// stall at once sends some 90 within 20 ms (seen with paceCatchUp at 5 s).
func TestAPacedReplayCatchesUpWithinItsBound(t *testing.T) {
	t.Parallel()
	testkit.EachBrokerIn(t, testkit.ClassicOn(t.Name()), func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		const (
			n     = 300
			rate  = 100.0
			catch = 250 * time.Millisecond
			slack = 25
		)
		led := &stallingLedger{stallAt: 8, stall: time.Second}
		e := newEnvTuned(t, replay.Config{}, on, func(d *replay.Deps) {
			led.Ledger = d.Ledger
			d.Ledger = led
		})
		r := e.rabbit
		src, dlq := r.DeadLettered(n, 128)
		p := preview(t, e, engine.Selection{DLQ: dlq})
		ctx := context.Background()
		ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Rate: rate, Step: n, Cap: n, Timeout: time.Minute}, false)
		if err != nil {
			t.Fatal(err)
		}

		// The sampler runs until every copy has arrived.
		sch := r.Channel()
		var (
			mu       sync.Mutex
			arrivals []arrival
		)
		all := make(chan struct{})
		go func() {
			defer close(all)
			tick := time.NewTicker(10 * time.Millisecond) // the sampling interval
			defer tick.Stop()
			deadline := time.Now().Add(time.Minute)
			for time.Now().Before(deadline) {
				before := time.Now()
				q, err := sch.QueueDeclarePassive(src, true, false, false, false, nil)
				if err != nil {
					return
				}
				mu.Lock()
				arrivals = append(arrivals, arrival{before: before, after: time.Now(), ready: q.Messages})
				mu.Unlock()
				if q.Messages >= n {
					return
				}
				<-tick.C
			}
		}()
		ran := runAsyncReplay(t, e, ap.Replay.ID, "owner")
		<-all
		// Every copy is in the target: a consumer lets the step settle.
		c := r.Consume(src, func(amqp.Delivery) string { return "ack" })
		rep := <-ran
		if rep.State != engine.StateFinished || rep.Sent != n {
			t.Fatalf("replay %s, sent %d of %d: %s", rep.State, rep.Sent, n, rep.Note)
		}
		testkit.Eventually(t, 30*time.Second, "the consumer acks every copy", func() bool {
			acked, _ := c.Counts()
			return acked >= n
		})

		mu.Lock()
		defer mu.Unlock()
		if last := arrivals[len(arrivals)-1]; last.ready != n {
			t.Fatalf("the sampler ended at %d of %d copies in the target", last.ready, n)
		}
		if led.calls.Load() < led.stallAt {
			t.Fatalf("the move wrote %d intents, fewer than the %d-th that stalls", led.calls.Load(), led.stallAt)
		}
		// The stall held the copies back: the count stood still, part way.
		var still time.Duration
		from := 0
		for j := 1; j < len(arrivals); j++ {
			if arrivals[j].ready != arrivals[from].ready {
				from = j
				continue
			}
			if a := arrivals[from]; a.ready > 0 && a.ready < n {
				still = max(still, arrivals[j].before.Sub(a.after))
			}
		}
		if still < 600*time.Millisecond {
			t.Fatalf("the target's count stood still for %v at most while copies were under way: the stall did not hold the publishes back", still)
		}
		worst := worstStretch(arrivals, rate, catch, slack)
		if worst.got > worst.allowed {
			t.Fatalf("%s", worst.words(arrivals, rate, catch, slack))
		}
		t.Logf("%d copies at rate %v, a stall of %v: the count stood still %v at most; the closest stretch to the bound: %.0f copies in %v, %.1f allowed",
			n, rate, led.stall, still.Round(time.Millisecond), worst.got, worst.span.Round(time.Millisecond), worst.allowed)
	})
}
