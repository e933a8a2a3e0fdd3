package engine_test

import (
	"testing"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// env is one test's engine on the real broker and Redis.
type env struct {
	rabbit *testkit.Rabbit
	broker *amqp.Broker
	store  *store.Store
	svc    *engine.Service
}

// newEnvB is newEnv for benchmarks, with the default engine settings.
func newEnvB(b *testing.B) *env { return newEnv(b, engine.Config{}) }

func newEnv(t testing.TB, cfg engine.Config) *env {
	t.Helper()
	return newEnvOn(t, cfg, testkit.Rabbit3)
}

// newEnvOn is newEnv on one broker of the matrix (testkit.EachBroker).
func newEnvOn(t testing.TB, cfg engine.Config, on testkit.Broker) *env {
	t.Helper()
	return newEnvTuned(t, cfg, on, nil)
}

// newEnvTuned is newEnvOn with the engine's deps changed by tune (when set)
// before the engine is built: a notifier, a wrapped store.
func newEnvTuned(t testing.TB, cfg engine.Config, on testkit.Broker, tune func(*engine.Deps)) *env {
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
	deps := engine.Deps{Broker: b, Mover: b, Counters: b, Watches: b, Tokens: st.Tokens(), Ledger: st.Ledger(), Replays: st.Replays(),
		Leases: st.Leases(), Taps: b, Returns: st.Returns(), Jobs: st.Jobs(), Registry: st.Workers(), Claims: st.Claims(), TapGaps: st.TapGaps()}
	if tune != nil {
		tune(&deps)
	}
	svc, err := engine.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return &env{rabbit: on.Dial(t), broker: b, store: st, svc: svc}
}
