package replay_test

import (
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// TestNewRequiresEveryPortProductionSets: an engine is built with every
// port production always sets (cmd/dlqbot's newEngine), so a missing one
// is refused, by name, when it is built, not found out when a replay runs
// or ends.
func TestNewRequiresEveryPortProductionSets(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, engine.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := amqp.New(amqp.Config{URL: testkit.Rabbit3.AMQPURL, ManagementURL: testkit.Rabbit3.ManagementURL, ReadMarks: st.ReadMarks()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	deps := func() replay.Deps {
		return replay.Deps{Broker: b, Mover: b, Counters: b, Watches: b, Consumers: b, Tokens: st.Tokens(), Ledger: st.Ledger(),
			Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(), Taps: b, Returns: st.Returns(), Claims: st.Claims(),
			TapGaps: st.TapGaps()}
	}
	if _, err := replay.New(replay.Config{}, deps()); err != nil {
		t.Fatalf("every required port set: %v", err)
	}
	for name, drop := range map[string]func(*replay.Deps){
		"Broker":    func(d *replay.Deps) { d.Broker = nil },
		"Tokens":    func(d *replay.Deps) { d.Tokens = nil },
		"Ledger":    func(d *replay.Deps) { d.Ledger = nil },
		"Replays":   func(d *replay.Deps) { d.Replays = nil },
		"Leases":    func(d *replay.Deps) { d.Leases = nil },
		"Mover":     func(d *replay.Deps) { d.Mover = nil },
		"Counters":  func(d *replay.Deps) { d.Counters = nil },
		"Consumers": func(d *replay.Deps) { d.Consumers = nil },
		"Watches":   func(d *replay.Deps) { d.Watches = nil },
		"Schedule":  func(d *replay.Deps) { d.Schedule = nil },
		"Taps":      func(d *replay.Deps) { d.Taps = nil },
		"Returns":   func(d *replay.Deps) { d.Returns = nil },
		"Claims":    func(d *replay.Deps) { d.Claims = nil },
		"TapGaps":   func(d *replay.Deps) { d.TapGaps = nil },
	} {
		d := deps()
		drop(&d)
		if _, err := replay.New(replay.Config{}, d); err == nil || !strings.Contains(err.Error(), "Deps."+name+" ") {
			t.Errorf("New without %s: %v, want an error naming Deps.%s", name, err, name)
		}
	}
}
