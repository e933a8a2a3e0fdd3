package engine

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// newPlan is the plan of items with sent copies already sent (by id),
// as a run makes it from its token's columns.
func newPlan(items []Item, sent map[string]int) *Plan { return PlanOf(Columns(items), sent) }

// mapPlan is the plan as it was before it became arrays with a cursor
// (maps keyed by id), kept as the reference the arrays must agree with.
type mapPlan struct {
	items   []Item
	left    map[string]int
	reached map[[2]string]bool
	depth   int // canaryDepth
}

func newMapPlan(items []Item, sent map[string]int) *mapPlan {
	p := &mapPlan{items: items, left: make(map[string]int, len(items)), reached: map[[2]string]bool{}}
	for _, it := range items {
		if n := it.Count - sent[it.ID]; n > 0 {
			p.left[it.ID] += n
		}
	}
	last := -1
	for i, it := range items {
		if sent[it.ID] > 0 {
			last = i
		}
	}
	for _, it := range items[:last+1] {
		p.reached[[2]string{it.Target, it.Group}] = true
	}
	return p
}

func (p *mapPlan) Remaining() int {
	n := 0
	for _, c := range p.left {
		n += c
	}
	return n
}

func (p *mapPlan) Drop(id string, n int) {
	if p.left[id] <= n {
		delete(p.left, id)
		return
	}
	p.left[id] -= n
}

func (p *mapPlan) Next(n int, first bool) map[string]int {
	first = first || len(p.reached) == 0
	if first {
		return p.first(n)
	}
	pick := map[string]int{}
	taken, extra, deferred := 0, 0, 0
	fresh, seen := map[[2]string]bool{}, map[string]bool{}
	for _, it := range p.items {
		if taken >= n {
			break
		}
		if seen[it.ID] || p.left[it.ID] == 0 {
			seen[it.ID] = true
			continue
		}
		seen[it.ID] = true
		k := [2]string{it.Target, it.Group}
		switch {
		case !first && !p.reached[k]:
			if extra == n {
				return pick
			}
			p.reached[k], fresh[k] = true, true
			pick[it.ID]++
			extra++
			if p.left[it.ID] > 1 {
				deferred++
			}
		case fresh[k]:
			if deferred == n {
				return pick
			}
			deferred++
		default:
			p.reached[k] = true
			more := min(p.left[it.ID], n-taken)
			pick[it.ID] += more
			taken += more
		}
	}
	return pick
}

// first is next's first step: one copy of every class whose first copy
// lies within depth, the rest of n the first copies in DLQ order.
func (p *mapPlan) first(n int) map[string]int {
	owed, seen := map[[2]string]bool{}, map[string]bool{}
	for _, it := range p.items {
		k := [2]string{it.Target, it.Group}
		if !seen[it.ID] && p.left[it.ID] > 0 && it.Seq < p.depth && !p.reached[k] {
			owed[k] = true
		}
		seen[it.ID] = true
	}
	pick, taken := map[string]int{}, 0
	clear(seen)
	for _, it := range p.items {
		if taken >= n && (len(owed) == 0 || it.Seq >= p.depth) {
			break
		}
		if seen[it.ID] || p.left[it.ID] == 0 {
			seen[it.ID] = true
			continue
		}
		seen[it.ID] = true
		k := [2]string{it.Target, it.Group}
		take := 0
		if owed[k] {
			delete(owed, k)
			take = 1
		}
		take += max(0, min(p.left[it.ID]-take, n-taken-take-len(owed)))
		if take > 0 {
			p.reached[k] = true
			pick[it.ID] += take
			taken += take
		}
	}
	return pick
}

// TestPlanStepsGoInDLQOrder checks the steps of one DLQ: the first step
// takes the first copies in DLQ order; a later step that reaches a new
// class (target × failure group) adds one copy of it and leaves the rest
// of that class it passes to the next step.
func TestPlanStepsGoInDLQOrder(t *testing.T) {
	t.Parallel()
	var items []Item
	add := func(id, group string) {
		items = append(items, Item{ID: id, Count: 1, Target: "q", Group: group, Seq: len(items)})
	}
	for i := range 12 {
		add(fmt.Sprintf("a%02d", i), "a")
	}
	add("t", "timeout")
	add("n1", "not found")
	add("n2", "not found")
	add("b", "b")
	for i := 12; i < 18; i++ {
		add(fmt.Sprintf("a%02d", i), "a")
	}
	p := newPlan(items, nil)
	want := [][]string{
		{"a00", "a01", "a02", "a03", "a04"},
		{"a05", "a06", "a07", "a08", "a09"},
		{"a10", "a11", "t", "n1", "b", "a12", "a13", "a14"},
		{"n2", "a15", "a16", "a17"},
	}
	depths := []int{5, 10, 19, 22}
	for k, w := range want {
		pick := p.Next(5, k == 0)
		exp := map[string]int{}
		for _, id := range w {
			exp[id] = 1
		}
		if !reflect.DeepEqual(pick, exp) {
			t.Fatalf("step %d picked %v, want %v", k+1, pick, exp)
		}
		if d := p.depth(pick); d != depths[k] {
			t.Fatalf("step %d reads %d deep, want %d", k+1, d, depths[k])
		}
		for id, n := range pick {
			p.Drop(id, n)
		}
	}
	if p.Remaining() != 0 {
		t.Fatalf("%d left after the steps, want 0", p.Remaining())
	}
}

// TestPlanAgreesWithMaps runs random plans (copies, earlier sends,
// classes, repeated ids in odd trials, an unknown id dropped) through steps and drops the way a
// replay does, and checks every pick and count against the map plan.
func TestPlanAgreesWithMaps(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 23))
	for trial := 0; trial < 300; trial++ {
		var items []Item
		sent := map[string]int{}
		for i := range 1 + r.IntN(300) {
			id := fmt.Sprintf("%016x", r.Uint64())
			if trial%2 == 1 && i > 0 && r.IntN(8) == 0 {
				id = items[r.IntN(i)].ID // an older token's repeated id
			}
			items = append(items, Item{ID: id, Count: 1 + r.IntN(3), Target: fmt.Sprintf("q%d", r.IntN(3)),
				Group: fmt.Sprintf("g%d", r.IntN(4)), Seq: i})
			if r.IntN(5) == 0 {
				sent[id] = r.IntN(4)
			}
		}
		a, b := newPlan(items, sent), newMapPlan(items, sent)
		if trial%4 != 0 {
			a.CanaryDepth = r.IntN(350)
			b.depth = a.CanaryDepth
		}
		for k := 1; a.Remaining() > 0 && k < 100; k++ {
			if a.Remaining() != b.Remaining() {
				t.Fatalf("trial %d step %d: %d left, want %d", trial, k, a.Remaining(), b.Remaining())
			}
			n := StepSize(1+r.IntN(5), 1+r.IntN(60), k)
			strat := k == 1 || r.IntN(4) == 0
			pb := b.Next(n, strat)
			drop := func(pick map[string]int) {
				for id, c := range pick {
					d := c
					if r.IntN(6) == 0 {
						d = c + 1 // given up on, more than picked
					}
					a.Drop(id, d)
					b.Drop(id, d)
				}
			}
			if trial%3 != 2 {
				pa := a.Next(n, strat)
				if !reflect.DeepEqual(pa, pb) {
					t.Fatalf("trial %d step %d: picked %v, want %v", trial, k, pa, pb)
				}
				drop(pa)
			} else {
				// The step in chunks (Config.Tune.StepChunk), each dropped before
				// the next is picked, as a chunked step sends them: together
				// they are next's pick, and count said so beforehand.
				w := a.Start(n, strat)
				copies, targets := w.Count()
				pa, wantTargets := map[string]int{}, map[string]bool{}
				for id, c := range pb {
					copies -= c
					wantTargets[a.Target(id)] = true
				}
				if copies != 0 || !reflect.DeepEqual(targets, wantTargets) {
					t.Fatalf("trial %d step %d: count off by %d, targets %v, want %v", trial, k, copies, targets, wantTargets)
				}
				for chunk := 1 + r.IntN(4); !w.Done; {
					part := w.More(chunk)
					for id, c := range part {
						pa[id] += c
					}
					drop(part)
				}
				if !reflect.DeepEqual(pa, pb) {
					t.Fatalf("trial %d step %d: chunks picked %v, want %v", trial, k, pa, pb)
				}
			}
			a.Drop("not-previewed", 1)
			b.Drop("not-previewed", 1)
		}
		if a.Remaining() != b.Remaining() {
			t.Fatalf("trial %d: %d left at the end, want %d", trial, a.Remaining(), b.Remaining())
		}
		for _, it := range items {
			if !a.Has(it.ID) || trial%2 == 0 && a.Target(it.ID) != it.Target {
				t.Fatalf("trial %d: id %s: has %v, target %q", trial, it.ID, a.Has(it.ID), a.Target(it.ID))
			}
		}
	}
}

// TestCursorHoldBoundCoversThePreviewsDepth checks the cursor's default
// bound: a sparse selection whose last pick lies deeper than
// DefaultCursorHold (10% of 1,000,000) may be held to its last pick, so
// that its steps read the DLQ once; a bound the operator sets is kept.
func TestCursorHoldBoundCoversThePreviewsDepth(t *testing.T) {
	items := make([]Item, 0, 100)
	for i := 9; i < 1000000; i += 10000 {
		items = append(items, Item{ID: fmt.Sprint("m-", i), Target: "work", Count: 1, Seq: i})
	}
	p := newPlan(items, nil)
	if p.Reach != 990010 {
		t.Fatalf("reach %d, want 990010 (one past the last item's position)", p.Reach)
	}
	for _, c := range []struct{ hold, reach, want int }{
		{0, p.Reach, 990010},
		{0, 5000, DefaultCursorHold},
		{1000, p.Reach, 1000},
	} {
		if got := HoldBound(c.hold, c.reach); got != c.want {
			t.Errorf("holdBound(%d, %d) = %d, want %d", c.hold, c.reach, got, c.want)
		}
	}
}

// BenchmarkPlanOf1M makes the plan of a whole-DLQ preview of 1,000,000
// items from its columns (what a run's start does, LoadColumns then
// planOf) and from Items (newPlan: what it did before, less the Items'
// own decode). Run it under the limit a deployment sets:
//
//	GOMEMLIMIT=280MiB go test ./engine -run '^$' -bench BenchmarkPlanOf1M -benchtime 5x
func BenchmarkPlanOf1M(b *testing.B) {
	const n = 1_000_000
	items := make([]Item, n)
	hexIDs := make([]byte, 0, 16*n) // one string, as a decoded token's
	for i := range items {
		hexIDs = fmt.Appendf(hexIDs, "%016x", uint64(i)*0x9e3779b97f4a7c15)
	}
	ids := string(hexIDs)
	for i := range items {
		items[i] = Item{ID: ids[16*i : 16*i+16], Count: 1, Target: "orders", Group: []string{"rejected", "expired"}[i%2], Seq: i}
	}
	b.Run("columns", func(b *testing.B) {
		cols := Columns(items)
		for range b.N {
			c := cols
			c.Count = append([]int32(nil), cols.Count...) // the plan keeps its columns
			if p := PlanOf(c, nil); p.Remaining() != n {
				b.Fatalf("%d left", p.Remaining())
			}
		}
	})
	b.Run("items", func(b *testing.B) {
		for range b.N {
			if p := newPlan(items, nil); p.Remaining() != n {
				b.Fatalf("%d left", p.Remaining())
			}
		}
	})
}

// TestPlanFirstStepHoldsEveryClass: 60 copies of one class followed by 5
// of another, default steps. The first step holds a copy of each class
// (the second's first copy, 60 deep) and no more than its 10 copies; the
// alpha copies it passes go out in the next steps. A class first met
// deeper than canaryDepth joins in the step that reaches it.
func TestPlanFirstStepHoldsEveryClass(t *testing.T) {
	t.Parallel()
	var items []Item
	for i := range 60 {
		items = append(items, Item{ID: fmt.Sprintf("a%02d", i), Count: 1, Target: "alpha", Group: "rejected", Seq: i})
	}
	for i := range 5 {
		items = append(items, Item{ID: fmt.Sprintf("b%d", i), Count: 1, Target: "bravo", Group: "rejected", Seq: 60 + i})
	}
	p := newPlan(items, nil)
	p.CanaryDepth = DefaultCanaryDepth
	pick := p.Next(DefaultStep, true)
	want := map[string]int{"b0": 1}
	for i := range 9 {
		want[fmt.Sprintf("a%02d", i)] = 1
	}
	if !reflect.DeepEqual(pick, want) || p.depth(pick) != 61 {
		t.Fatalf("first step picked %v (%d deep), want a00…a08 and b0 (61 deep)", pick, p.depth(pick))
	}
	for id, n := range pick {
		p.Drop(id, n)
	}
	pick = p.Next(StepSize(DefaultStep, DefaultCap, 2), false)
	if len(pick) != 20 || pick["a09"] != 1 || pick["a28"] != 1 || pick["b1"] != 0 {
		t.Fatalf("second step picked %v, want a09…a28", pick)
	}

	// Bravo past the bound: the first step is alpha's first 10, and bravo
	// goes out one copy ahead of its bulk in the step that reaches it.
	p = newPlan(items, nil)
	p.CanaryDepth = 50
	if pick := p.Next(DefaultStep, true); len(pick) != 10 || pick["a09"] != 1 {
		t.Fatalf("first step with bravo past the bound picked %v, want a00…a09", pick)
	}
	// More classes than the step's size: one copy of each, no more.
	var many []Item
	for i := range 15 {
		many = append(many, Item{ID: fmt.Sprintf("c%02d", i), Count: 3, Target: "q", Group: fmt.Sprintf("g%d", i), Seq: i})
	}
	p = newPlan(many, nil)
	p.CanaryDepth = DefaultCanaryDepth
	if pick := p.Next(DefaultStep, true); len(pick) != 15 || CopiesIn(pick) != 15 {
		t.Fatalf("first step of 15 classes picked %v, want one copy of each", pick)
	}
}

// TestFirstStepCoverAgreesWithPlan: the preview's account of the first
// step (firstStepCover) is what a fresh plan's first step picks: the
// classes it covers and how deep it reads.
func TestFirstStepCoverAgreesWithPlan(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(11, 5))
	for trial := 0; trial < 500; trial++ {
		var items []Item
		seq := 0
		for i := range 1 + r.IntN(200) {
			seq += 1 + r.IntN(3)
			items = append(items, Item{ID: fmt.Sprintf("i%d", i), Count: 1 + r.IntN(3), Target: fmt.Sprintf("q%d", r.IntN(2)),
				Group: fmt.Sprintf("g%d", r.IntN(1+r.IntN(12))), Seq: seq})
		}
		n, depth := 1+r.IntN(20), r.IntN(500)
		p := newPlan(items, nil)
		p.CanaryDepth = depth
		pick := p.Next(n, true)
		wantClasses, all := map[[2]string]bool{}, map[[2]string]bool{}
		for _, it := range items {
			k := [2]string{it.Target, it.Group}
			all[k] = true
			if pick[it.ID] > 0 {
				wantClasses[k] = true
			}
		}
		number := map[[2]string]int{}
		covered, classes, read := FirstStepCover(n, depth, func(yield func(int, int, int) bool) {
			for _, it := range items {
				k := [2]string{it.Target, it.Group}
				if _, ok := number[k]; !ok {
					number[k] = len(number)
				}
				if !yield(it.Count, number[k], it.Seq) {
					return
				}
			}
		})
		if covered != len(wantClasses) || classes != len(all) || read != p.depth(pick) {
			t.Fatalf("trial %d: cover %d of %d classes, %d deep; the plan's first step covers %d of %d, %d deep",
				trial, covered, classes, read, len(wantClasses), len(all), p.depth(pick))
		}
	}
}
