package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// claimCounter is the real store's claims with a count of the step's
// claims (one per chunk) and the most ids one of them held.
type claimCounter struct {
	engine.Claims
	calls atomic.Int64
	mu    sync.Mutex
	most  int
}

func (c *claimCounter) Claim(ctx context.Context, dlq, replay string, ids []string, since time.Time, ttl time.Duration) (map[string]engine.Claim, error) {
	c.calls.Add(1)
	c.mu.Lock()
	c.most = max(c.most, len(ids))
	c.mu.Unlock()
	return c.Claims.Claim(ctx, dlq, replay, ids, since, ttl)
}

// TestLargeStepIsSentInChunks: one step of 300 with a StepChunk of 64 is
// claimed and moved in 5 chunks over one read of the DLQ, and is still one
// step: planned 300, sent 300, settled as a whole, every message delivered
// once and the DLQ empty. On every broker, classic and quorum DLQs.
func TestLargeStepIsSentInChunks(t *testing.T) {
	t.Parallel()
	const n, chunk = 300, 64
	everyDLQKindOn(t, testkit.Brokers(), func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		cfg := fast
		cfg.StepChunk = chunk
		var cc *claimCounter
		ev := &events{}
		e := newEnvTuned(t, cfg, on, func(d *engine.Deps) {
			cc = &claimCounter{Claims: d.Claims}
			d.Claims, d.Notifier = cc, ev
		})
		r := e.rabbit
		src, dlq := r.DeadLetteredAs(dlqArgs, n, 100)
		got := &counter{}
		r.Consume(src, got.handle)
		p := preview(t, e, engine.Selection{DLQ: dlq})
		before := cc.calls.Load()
		rep := approveRun(t, e, p.Token, oneStep, false)
		expectExact(t, r, rep, n, dlq, got)
		res, started, _ := passed(ev)
		if rep.Step != 1 || len(res) != 1 || len(started) != 1 {
			t.Fatalf("step %d, %d started and %d passed; want the one step the parameters ask for", rep.Step, len(started), len(res))
		}
		if s := res[1]; s.Planned != n || s.Sent != n || s.Settled != n {
			t.Errorf("step: planned %d, sent %d, settled %d; want %d of each", s.Planned, s.Sent, s.Settled, n)
		}
		calls := cc.calls.Load() - before
		cc.mu.Lock()
		most := cc.most
		cc.mu.Unlock()
		if want := int64((n + chunk - 1) / chunk); calls != want || most > chunk {
			t.Errorf("the step made %d claim(s), the largest of %d ids; want %d of at most %d", calls, most, want, chunk)
		}
	})
}
