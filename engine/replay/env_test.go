package replay_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// env is one test's engine on the real broker and Redis.
type env struct {
	rabbit *testkit.Rabbit
	broker *amqp.Broker
	store  *store.Store
	svc    *replay.Service
	// scans counts the engine's reads of whole queues (Scan), unless a
	// tune replaced the broker.
	scans *scanCounter
}

// newEnvB is newEnv for benchmarks, with the default engine settings.
func newEnvB(b *testing.B) *env { return newEnv(b, replay.Config{}) }

func newEnv(t testing.TB, cfg replay.Config) *env {
	t.Helper()
	return newEnvOn(t, cfg, testkit.Rabbit3)
}

// newEnvOn is newEnv on one broker of the matrix (testkit.EachBroker).
func newEnvOn(t testing.TB, cfg replay.Config, on testkit.Broker) *env {
	t.Helper()
	return newEnvTuned(t, cfg, on, nil)
}

// newEnvTuned is newEnvOn with the engine's deps changed by tune (when set)
// before the engine is built: a notifier, a wrapped store.
func newEnvTuned(t testing.TB, cfg replay.Config, on testkit.Broker, tune func(*replay.Deps)) *env {
	t.Helper()
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, engine.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := amqp.New(amqp.Config{URL: on.AMQPURL, ManagementURL: on.ManagementURL, ReadMarks: st.ReadMarks()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	sc := &scanCounter{Broker: b}
	deps := replay.Deps{Broker: sc, Mover: b, Counters: b, Watches: b, Tokens: st.Tokens(), Ledger: st.Ledger(), Replays: st.Replays(),
		Leases: st.Leases(), Schedule: st.Schedule(), Taps: b, Returns: st.Returns(), Jobs: st.Jobs(), Registry: st.Workers(), Claims: st.Claims(), TapGaps: st.TapGaps(), Consumers: testkit.ConsumersOff{}}
	if tune != nil {
		tune(&deps)
	}
	svc, err := replay.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return &env{rabbit: on.Dial(t), broker: b, store: st, svc: svc, scans: sc}
}

// scanCounter is the real broker with a count of the reads of whole
// queues (Scan) the engine makes through it: whether an approval read its
// DLQ, told exactly (the management deliver_get can miss a read whose
// channel closed between two samples, as 3.10, 4.0 and 4.3 did).
type scanCounter struct {
	engine.Broker
	scans atomic.Int64
}

func (c *scanCounter) Scan(ctx context.Context, queue string, visit func(engine.Message) error) (engine.ScanInfo, error) {
	c.scans.Add(1)
	return c.Broker.Scan(ctx, queue, visit)
}
