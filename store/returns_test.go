package store

import (
	"testing"

	"github.com/stroma/dlqbot/engine"
)

func TestReturnsCountEventsGroupsAndSkipsRedeliveredDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rs := e.st.Returns()
	ev := func(rid, id, g string, rc int, redel bool) engine.ReturnEvent {
		return engine.ReturnEvent{ReplayID: rid, ID: id, Group: g, Reason: "rejected", ReplayCount: rc, At: e.clock.Now(), Redelivered: redel}
	}
	if err := rs.Record(e.ctx, "q.dlq", nil, 3); err != nil { // arrivals before the replay began
		t.Fatal(err)
	}
	if err := rs.Begin(e.ctx, "r_1", "q.dlq"); err != nil {
		t.Fatal(err)
	}
	batch := []engine.ReturnEvent{
		ev("r_1", "a", "rejected", 1, false),
		ev("r_1", "a", "rejected", 1, false), // an identical copy came back too: two events
		ev("r_1", "b", "Boom: x <n>", 3, false),
		ev("r_2", "c", "rejected", 1, false),
	}
	if err := rs.Record(e.ctx, "q.dlq", batch, 5); err != nil {
		t.Fatal(err)
	}
	// A redelivered tap message already recorded is not counted again; a
	// redelivered one never recorded is.
	if err := rs.Record(e.ctx, "q.dlq", []engine.ReturnEvent{ev("r_1", "b", "Boom: x <n>", 3, true), ev("r_1", "d", "rejected", 1, true)}, 2); err != nil {
		t.Fatal(err)
	}
	if err := rs.Begin(e.ctx, "r_1", "q.dlq"); err != nil { // a resume keeps the first baseline
		t.Fatal(err)
	}
	rec, err := rs.Returned(e.ctx, "r_1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Tapped || rec.Baseline != 3 || rec.Total != 4 {
		t.Fatalf("record %+v: want tapped, baseline 3, 4 returns", rec)
	}
	groups := map[string]int{}
	for _, g := range rec.Groups {
		groups[g.Group] = g.Count
		if g.Example.ID == "" {
			t.Errorf("group %q has no example", g.Group)
		}
	}
	if len(groups) != 2 || groups["rejected"] != 3 || groups["Boom: x <n>"] != 1 {
		t.Fatalf("groups %v", groups)
	}
	if rec.ReplayCounts[1] != 3 || rec.ReplayCounts[3] != 1 || rec.IDs["b"] != 3 || len(rec.IDs) != 3 {
		t.Fatalf("replay counts %v ids %v", rec.ReplayCounts, rec.IDs)
	}
	if len(rec.Events) != 4 || rec.Events[3].ID != "d" {
		t.Fatalf("events %+v", rec.Events)
	}
	if rec2, _ := rs.Returned(e.ctx, "r_1", 3); len(rec2.Events) != 1 {
		t.Fatalf("events from 3: %+v", rec2.Events)
	}
	if n, err := rs.Arrived(e.ctx, "q.dlq"); err != nil || n != 10 {
		t.Fatalf("arrived %d %v, want 10", n, err)
	}
	if other, _ := rs.Returned(e.ctx, "r_9", 0); other.Tapped || other.Total != 0 {
		t.Fatalf("unknown replay %+v", other)
	}
	if err := rs.AddTap(e.ctx, "q.dlq"); err != nil {
		t.Fatal(err)
	}
	if qs, err := rs.Tapped(e.ctx); err != nil || len(qs) != 1 || qs[0] != "q.dlq" {
		t.Fatalf("tapped %v %v", qs, err)
	}
	if err := rs.RemoveTap(e.ctx, "q.dlq"); err != nil {
		t.Fatal(err)
	}
	if qs, err := rs.Tapped(e.ctx); err != nil || len(qs) != 0 {
		t.Fatalf("tapped after removal %v %v", qs, err)
	}
	if err := rs.Record(e.ctx, "q.dlq", []engine.ReturnEvent{ev("bad{id", "a", "g", 1, false)}, 1); err == nil {
		t.Fatal("a replay id with a brace was accepted")
	}
}
