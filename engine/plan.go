package engine

// plan tracks which copies of a frozen multiset are still to be sent and
// picks each canary step's messages.
type plan struct {
	items []Item         // DLQ order
	left  map[string]int // id → copies not yet sent
}

func newPlan(items []Item, sent map[string]int) *plan {
	p := &plan{items: items, left: make(map[string]int, len(items))}
	for _, it := range items {
		if n := it.Count - sent[it.ID]; n > 0 {
			p.left[it.ID] += n
		}
	}
	return p
}

// remaining is how many copies are still to be sent.
func (p *plan) remaining() int {
	n := 0
	for _, c := range p.left {
		n += c
	}
	return n
}

// drop removes n copies of id from what is left (sent, or given up on).
func (p *plan) drop(id string, n int) {
	if p.left[id] <= n {
		delete(p.left, id)
		return
	}
	p.left[id] -= n
}

// stepSize is the size of step k (from 1): first, doubling up to limit.
func stepSize(first, limit, k int) int {
	n := first
	for i := 1; i < k && n < limit; i++ {
		n *= 2
	}
	return min(n, limit)
}

// next picks up to n copies for a step, as id → copies. A stratified step
// first takes one copy of every (target × failure group) still left, even
// when that exceeds n, then fills up in DLQ order.
func (p *plan) next(n int, stratified bool) map[string]int {
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

// targets maps every id to its target queue.
func (p *plan) targets() map[string]string {
	t := make(map[string]string, len(p.items))
	for _, it := range p.items {
		t[it.ID] = it.Target
	}
	return t
}
