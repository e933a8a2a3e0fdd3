package engine

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// mapPlan is the plan as it was before it became arrays with a cursor
// (maps keyed by id), kept as the reference the arrays must agree with.
type mapPlan struct {
	items []Item
	left  map[string]int
}

func newMapPlan(items []Item, sent map[string]int) *mapPlan {
	p := &mapPlan{items: items, left: make(map[string]int, len(items))}
	for _, it := range items {
		if n := it.Count - sent[it.ID]; n > 0 {
			p.left[it.ID] += n
		}
	}
	return p
}

func (p *mapPlan) remaining() int {
	n := 0
	for _, c := range p.left {
		n += c
	}
	return n
}

func (p *mapPlan) drop(id string, n int) {
	if p.left[id] <= n {
		delete(p.left, id)
		return
	}
	p.left[id] -= n
}

func (p *mapPlan) next(n int, stratified bool) map[string]int {
	pick := map[string]int{}
	taken := 0
	if stratified {
		seen := map[[2]string]bool{}
		for _, it := range p.items {
			k := [2]string{it.Target, it.Group}
			if seen[k] || p.left[it.ID] == 0 {
				continue
			}
			seen[k] = true
			pick[it.ID]++
			taken++
		}
	}
	for _, it := range p.items {
		if taken >= n {
			break
		}
		for pick[it.ID] < p.left[it.ID] && taken < n {
			pick[it.ID]++
			taken++
		}
	}
	return pick
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
		for k := 1; a.remaining() > 0 && k < 100; k++ {
			if a.remaining() != b.remaining() {
				t.Fatalf("trial %d step %d: %d left, want %d", trial, k, a.remaining(), b.remaining())
			}
			n := stepSize(1+r.IntN(5), 1+r.IntN(60), k)
			strat := k == 1 || r.IntN(4) == 0
			pa, pb := a.next(n, strat), b.next(n, strat)
			if !reflect.DeepEqual(pa, pb) {
				t.Fatalf("trial %d step %d: picked %v, want %v", trial, k, pa, pb)
			}
			for id, c := range pa {
				d := c
				if r.IntN(6) == 0 {
					d = c + 1 // given up on, more than picked
				}
				a.drop(id, d)
				b.drop(id, d)
			}
			a.drop("not-previewed", 1)
			b.drop("not-previewed", 1)
		}
		if a.remaining() != b.remaining() {
			t.Fatalf("trial %d: %d left at the end, want %d", trial, a.remaining(), b.remaining())
		}
		for _, it := range items {
			if !a.has(it.ID) || trial%2 == 0 && a.target(it.ID) != it.Target {
				t.Fatalf("trial %d: id %s: has %v, target %q", trial, it.ID, a.has(it.ID), a.target(it.ID))
			}
		}
	}
}
