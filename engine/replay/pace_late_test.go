package replay_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// stallingLook is the real broker, but once armed, the next look at
// queue (Look: a passive declare) takes stall longer, and it notes
// when that look began and ended: a broker too loaded to answer.
type stallingLook struct {
	engine.Broker
	queue string
	stall time.Duration
	armed atomic.Bool

	mu           sync.Mutex
	began, ended time.Time
}

func (s *stallingLook) Look(ctx context.Context, q string) (engine.QueueInfo, error) {
	if q == s.queue && s.armed.CompareAndSwap(true, false) {
		began := time.Now()
		select {
		case <-ctx.Done():
		case <-time.After(s.stall): // the fault itself, not a wait for something
		}
		defer func() {
			s.mu.Lock()
			s.began, s.ended = began, time.Now()
			s.mu.Unlock()
		}()
	}
	return s.Broker.Look(ctx, q)
}

// TestAnAutoPacedReplayHoldsWhileItsSampleIsLate: a replay at rate=auto
// (max=200) samples its target beside its publishes; when one sample
// stalls for 4 s (stallingLook), the replay sends at its last rate for
// 1.5 s at most, then one copy a second until the sample is back
// (engine.Pacer.RateSampling), and finishes. Counted where the consumer
// gets the copies: from 1.5 s into the stall (plus 350 ms for the
// broker's jitter) to its end, at most one a second and 6 more.
func TestAnAutoPacedReplayHoldsWhileItsSampleIsLate(t *testing.T) {
	t.Parallel()
	testkit.EachBrokerIn(t, testkit.ClassicOn(t.Name()), func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		const (
			n      = 1200
			held   = 1500*time.Millisecond + 350*time.Millisecond
			stall  = 4 * time.Second
			extra  = 6
			armAt  = 150
			maxOut = 200
		)
		var si *stallingLook
		e := newEnvTuned(t, replay.Config{}, on, func(d *replay.Deps) {
			si = &stallingLook{Broker: d.Broker, stall: stall}
			d.Broker = si
		})
		r := e.rabbit
		src, dlq := r.DeadLettered(n, 128)
		si.queue = src
		p := preview(t, e, engine.Selection{DLQ: dlq})
		var (
			mu       sync.Mutex
			arrivals []time.Time
		)
		r.Consume(src, func(amqp.Delivery) string {
			mu.Lock()
			arrivals = append(arrivals, time.Now())
			mu.Unlock()
			return "ack"
		})
		got := func() []time.Time {
			mu.Lock()
			defer mu.Unlock()
			return append([]time.Time(nil), arrivals...)
		}
		ctx := context.Background()
		ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Auto: true, Max: maxOut, Step: n, Cap: n, Timeout: time.Minute}, false)
		if err != nil {
			t.Fatal(err)
		}
		ran := runAsyncReplay(t, e, ap.Replay.ID, "owner")
		testkit.Eventually(t, 30*time.Second, "the first copies at the consumer", func() bool { return len(got()) >= armAt })
		si.armed.Store(true)
		rep := <-ran
		if rep.State != engine.StateFinished || rep.Sent != n {
			t.Fatalf("replay %s, sent %d of %d: %s", rep.State, rep.Sent, n, rep.Note)
		}
		testkit.Eventually(t, 30*time.Second, "every copy at the consumer", func() bool { return len(got()) >= n })
		si.mu.Lock()
		began, ended := si.began, si.ended
		si.mu.Unlock()
		if ended.IsZero() {
			t.Fatal("no sample of the target stalled: the replay ended before it looked again")
		}
		from := began.Add(held)
		in := 0
		for _, at := range got() {
			if at.After(from) && at.Before(ended) {
				in++
			}
		}
		allowed := int(ended.Sub(from).Seconds()) + 1 + extra
		if in > allowed {
			t.Fatalf("%d copies reached the consumer in the %v from %v into a stalled sample to its end, want at most %d (one a second, +%d)",
				in, ended.Sub(from).Round(time.Millisecond), held, allowed, extra)
		}
		t.Logf("a sample stalled %v (of %v asked): %d copies in the %v from %v into it, %d allowed; %s",
			ended.Sub(began).Round(time.Millisecond), stall, in, ended.Sub(from).Round(time.Millisecond), held, allowed, rep.Pace)
	})
}
