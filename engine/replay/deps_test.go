package replay_test

import (
	"testing"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// TestNewRequiresAMoverAndASchedule: an engine is built with every port
// production always sets, so a missing mover or schedule is refused when
// it is built, not found out when a replay runs or ends.
func TestNewRequiresAMoverAndASchedule(t *testing.T) {
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
		return replay.Deps{Broker: b, Mover: b, Tokens: st.Tokens(), Ledger: st.Ledger(), Replays: st.Replays(),
			Leases: st.Leases(), Schedule: st.Schedule()}
	}
	if _, err := replay.New(replay.Config{}, deps()); err != nil {
		t.Fatalf("every required port set: %v", err)
	}
	for name, drop := range map[string]func(*replay.Deps){
		"mover":    func(d *replay.Deps) { d.Mover = nil },
		"schedule": func(d *replay.Deps) { d.Schedule = nil },
	} {
		d := deps()
		drop(&d)
		if _, err := replay.New(replay.Config{}, d); err == nil {
			t.Errorf("New without a %s: no error", name)
		}
	}
}
