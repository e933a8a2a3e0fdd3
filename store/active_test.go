package store

import (
	"slices"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

func TestActiveIndexFollowsState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rs := e.st.Replays()
	for _, id := range []string{"r_a", "r_b", "r_c"} {
		if err := rs.Create(e.ctx, engine.Replay{ID: id, State: engine.StateQueued}); err != nil {
			t.Fatal(err)
		}
	}
	epoch, ok, err := e.st.Leases().Acquire(e.ctx, "r_a", "w1", time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if err := rs.Put(e.ctx, engine.Replay{ID: "r_a", State: engine.StateFinished}, "w1", epoch); err != nil {
		t.Fatal(err)
	}
	if err := rs.UpdateUnowned(e.ctx, "r_b", func(r *engine.Replay) error { r.State = engine.StateCancelled; return nil }); err != nil {
		t.Fatal(err)
	}
	// A record that expired leaves a stale index entry, which Active drops.
	if err := rs.Create(e.ctx, engine.Replay{ID: "r_gone", State: engine.StateRunning}); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.Del(e.ctx, e.st.b.k.replay("r_gone")).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := rs.Active(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"r_c"}) {
		t.Fatalf("active %v, want [r_c]", got)
	}
	if n, _ := e.rdb.SCard(e.ctx, e.st.b.k.active()).Result(); n != 1 {
		t.Fatalf("index holds %d entries after pruning, want 1", n)
	}
}
