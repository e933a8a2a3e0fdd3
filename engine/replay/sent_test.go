package replay

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// TestIDIndexAgreesWithAMap: the plan's index finds each id's first item,
// as a map written first item first does, for ids of any form, and finds
// no id it was not given.
func TestIDIndexAgreesWithAMap(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 5))
	for trial := range 50 {
		var ids []string
		for i := range r.IntN(2000) {
			switch {
			case i > 0 && r.IntN(10) == 0:
				ids = append(ids, ids[r.IntN(i)]) // repeated
			case r.IntN(7) == 0:
				ids = append(ids, fmt.Sprintf("msg-%d", r.IntN(1e6))) // not a fingerprint
			default:
				ids = append(ids, fmt.Sprintf("%016x", r.Uint64()))
			}
		}
		want := map[string]int32{}
		x := engine.NewIDIndex(ids)
		for i, id := range ids {
			if _, ok := want[id]; !ok {
				want[id] = int32(i)
			}
			x.Add(id, int32(i))
		}
		if len(x.Slots)*3 < len(ids)*4 {
			t.Fatalf("trial %d: %d slots for %d ids", trial, len(x.Slots), len(ids))
		}
		for id, i := range want {
			if got, ok := x.Get(id); !ok || got != i {
				t.Fatalf("trial %d: %s at %d (%v), want %d", trial, id, got, ok, i)
			}
		}
		if _, ok := x.Get("not-an-id"); ok {
			t.Fatalf("trial %d: found an id never added", trial)
		}
		distinct := engine.NewIDIndex(ids)
		if got := distinct.Distinct(); got != (len(want) == len(ids)) {
			t.Fatalf("trial %d: distinct %v with %d of %d ids distinct", trial, got, len(want), len(ids))
		}
	}
}

// TestSentBookingKeepsEveryCopy: the copies a move reports sent are booked
// as they were listed: each id in the step's sent set, each copy out of
// the plan and counted at its target, including copies of an id the plan
// does not hold or sent to another target than the plan's.
func TestSentBookingKeepsEveryCopy(t *testing.T) {
	t.Parallel()
	items := []engine.Item{
		{ID: "aaaaaaaaaaaaaaaa", Count: 2, Target: "q1", Seq: 0},
		{ID: "bbbbbbbbbbbbbbbb", Count: 1, Target: "q2", Seq: 1},
		{ID: "cccccccccccccccc", Count: 1, Target: "q1", Seq: 2},
	}
	rn := &run{plan: engine.PlanOf(engine.Columns(items), nil)}
	rn.stepSent = newSentSet(rn.plan)
	kept := &sentItems{p: rn.plan}
	kept.Add([]engine.Moved{{ID: "aaaaaaaaaaaaaaaa", Target: "q1"}, {ID: "bbbbbbbbbbbbbbbb", Target: "q2"}})
	kept.Add([]engine.Moved{{ID: "aaaaaaaaaaaaaaaa", Target: "q1"}, {ID: "elsewhere", Target: "q3"}, {ID: "cccccccccccccccc", Target: "q9"}})
	mr := engine.MoveResult{Failed: []engine.MoveFailure{
		{Moved: engine.Moved{ID: "lost", Target: "q1"}, Kind: engine.MoveLost},
		{Moved: engine.Moved{ID: "nacked", Target: "q1"}, Kind: engine.MoveNacked},
	}}
	sentPer := map[string]int{}
	if n := rn.bookSent(kept, mr, sentPer); n != 5 {
		t.Fatalf("booked %d copies, want 5", n)
	}
	if want := map[string]int{"q1": 2, "q2": 1, "q3": 1, "q9": 1}; fmt.Sprint(sentPer) != fmt.Sprint(want) {
		t.Fatalf("sent per target %v, want %v", sentPer, want)
	}
	if left := rn.plan.Remaining(); left != 0 {
		t.Fatalf("%d copies left in the plan, want 0", left)
	}
	for id, want := range map[string]bool{"aaaaaaaaaaaaaaaa": true, "bbbbbbbbbbbbbbbb": true, "cccccccccccccccc": true,
		"elsewhere": true, "lost": true, "nacked": false, "dddddddddddddddd": false} {
		if got := rn.stepSent.Has(id); got != want {
			t.Errorf("sent set has %s: %v, want %v", id, got, want)
		}
	}
}
