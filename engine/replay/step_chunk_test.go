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
// claimed and moved in 5 chunks over one read of the DLQ (the cursor of a
// tapped replay), and is still one step: planned 300, sent 300, settled as
// a whole, every message delivered once and the DLQ empty. A DLQ fed
// through the default exchange (no tap: returns found at the cursor's
// tail) goes through the cursor the same way. A quorum DLQ on every
// broker, a classic one on one (everyDLQKindOn).
func TestLargeStepIsSentInChunks(t *testing.T) {
	t.Parallel()
	const n, chunk = 300, 64
	for _, tc := range []struct {
		name   string
		tapped bool
		claims int64
	}{{"through-the-cursor", true, (n + chunk - 1) / chunk}, {"default-exchange", false, (n + chunk - 1) / chunk}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			everyDLQKindOn(t, testkit.Brokers(), func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
				cfg := fast
				cfg.Tune.StepChunk = chunk
				var cc *claimCounter
				ev := &events{}
				tune := func(d *replay.Deps) {
					cc = &claimCounter{Claims: d.Claims}
					d.Claims, d.Notifier = cc, ev
				}
				e := newEnvTuned(t, cfg, on, tune)
				var src, dlq string
				if tc.tapped { // a DLQ fed through an exchange: a tap, and so a cursor
					src, dlq = testkit.Name("src"), testkit.Name("dlq")
					e.rabbit.DLXTopology(src, dlq, dlqArgs)
					e.rabbit.Reject(src, testkit.Msgs(n, 100)...)
					e.rabbit.WaitCount(dlq, n, 30*time.Second)
				} else { // through the default exchange: no tap, re-reads
					src, dlq = e.rabbit.DeadLetteredAs(dlqArgs, n, 100)
				}
				r := e.rabbit
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
				want := tc.claims
				if !tc.tapped && dlqArgs["x-queue-type"] == "quorum" {
					want = 1 // without a tap a quorum DLQ is read without a cursor (tailReads)
				}
				if calls != want || want > 1 && most > chunk {
					t.Errorf("the step made %d claim(s), the largest of %d ids; want %d (of at most %d ids through the cursor)", calls, most, want, chunk)
				}
			})
		})
	}
}

// TestConnectionLostInAChunkedStep closes the engine's broker connection in
// the middle of one unpaced step of 3,000 sent in chunks of 64 through the
// cursor (a tapped engine): the close lands in a chunk's move or between
// two, and either way the step stops there, saying why, nothing lost and
// nothing called missing, every copy the target got in the ledger; the
// rest stays planned (no later chunk goes out on a new connection), and a
// resume sends it without sending again anything the ledger lists. A
// quorum and a classic DLQ, each on one broker (everyDLQKindOn).
func TestConnectionLostInAChunkedStep(t *testing.T) {
	t.Parallel()
	everyDLQKindOn(t, testkit.Brokers(), func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		const n = 3000
		cfg := fast
		cfg.Tune.Reconnect = -1 // stops at the loss, as an unpaced replay does by default
		f := newTappedFaultRun(t, on, dlqArgs, n, cfg)
		id, rep := f.breakOneStep(t, n, 60*time.Second)
		t.Logf("after the fault: state %s, step %d, sent %d, in doubt %d, duplicates %d: %s", rep.State, rep.Step, rep.Sent, rep.InDoubt, rep.Duplicates, rep.Note)
		f.expectStoppedByFault(t, rep)
		if rep.Step != 1 || rep.Sent >= n {
			t.Fatalf("stopped at step %d with %d sent; want step 1 cut short", rep.Step, rep.Sent)
		}
		f.resumeAfterFault(t, id, f.account(t, "after the fault", id), 90*time.Second)
	})
}
