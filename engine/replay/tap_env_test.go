package replay_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// reads counts the reads of each queue that go through the engine's
// broker (Scan) and mover (Move), so a test can hold the broker's own
// delivery counts against them.
type reads struct {
	engine.Broker
	engine.Mover
	mu    sync.Mutex
	scans map[string]int
	moves map[string]int
}

func (r *reads) Scan(ctx context.Context, q string, visit func(engine.Message) error) (engine.ScanInfo, error) {
	r.mu.Lock()
	r.scans[q]++
	r.mu.Unlock()
	return r.Broker.Scan(ctx, q, visit)
}

func (r *reads) Move(ctx context.Context, req engine.MoveRequest) (engine.MoveResult, error) {
	r.mu.Lock()
	r.moves[req.Queue]++
	r.mu.Unlock()
	return r.Mover.Move(ctx, req)
}

// of returns the scans and moves of q so far.
func (r *reads) of(q string) (scans, moves int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.scans[q], r.moves[q]
}

// graceful is fast with a grace period long enough for returns to arrive
// on a loaded machine, for tests that need every return of a step seen
// by the step itself.
var graceful = func() replay.Config { c := fast; c.SettleGrace = 2 * time.Second; return c }()

// tapEnv is one test's engine on broker b, with taps, counting reads.
type tapEnv struct {
	env
	reads *reads
}

func newTapEnv(t testing.TB, b testkit.Broker, cfg replay.Config, extra func(*replay.Deps)) *tapEnv {
	t.Helper()
	br, err := amqp.New(amqp.Config{URL: b.AMQPURL, ManagementURL: b.ManagementURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = br.Close() })
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, engine.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	rd := &reads{Broker: br, Mover: br, scans: map[string]int{}, moves: map[string]int{}}
	deps := replay.Deps{Broker: rd, Mover: rd, Counters: br, Tokens: st.Tokens(), Ledger: st.Ledger(),
		Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(), Taps: br, Returns: st.Returns(), TapGaps: st.TapGaps(), Consumers: testkit.ConsumersOff{}, Watches: testkit.WatchesOff{}, Claims: testkit.ClaimsOff{}}
	if extra != nil {
		extra(&deps)
	}
	svc, err := replay.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return &tapEnv{env: env{rabbit: b.Dial(t), broker: br, store: st, svc: svc}, reads: rd}
}
