package engine

// plan tracks which copies of a frozen multiset are still to be sent and
// picks each canary step's messages. It is arrays over the frozen items
// (in DLQ order) with a cursor, and one id → item index: no map per
// purpose, nothing copied per item.
type plan struct {
	items []Item           // DLQ order
	index map[string]int32 // id → its first item
	// left is, at an id's first item, its copies not yet sent (0 at any
	// later item of the same id: a preview's items have distinct ids, an
	// older token might not).
	left  []int32
	total int // sum of left
	// cursor is the first item whose id still has copies left; every item
	// before it has none.
	cursor int
}

func newPlan(items []Item, sent map[string]int) *plan {
	p := &plan{items: items, index: make(map[string]int32, len(items)), left: make([]int32, len(items))}
	for i, it := range items {
		first, ok := p.index[it.ID]
		if !ok {
			first = int32(i)
			p.index[it.ID] = first
		}
		if n := it.Count - sent[it.ID]; n > 0 {
			p.left[first] += int32(n)
			p.total += n
		}
	}
	return p
}

// remaining is how many copies are still to be sent.
func (p *plan) remaining() int { return p.total }

// drop removes n copies of id from what is left (sent, or given up on).
func (p *plan) drop(id string, n int) {
	i, ok := p.index[id]
	if !ok {
		return
	}
	d := min(int32(n), p.left[i])
	if d <= 0 {
		return
	}
	p.left[i] -= d
	p.total -= int(d)
}

// has reports whether id is one of the frozen items.
func (p *plan) has(id string) bool {
	_, ok := p.index[id]
	return ok
}

// target returns id's target queue ("" for an id not in the plan).
func (p *plan) target(id string) string {
	if i, ok := p.index[id]; ok {
		return p.items[i].Target
	}
	return ""
}

// leftAt is how many copies of item i's id are still to be sent.
func (p *plan) leftAt(i int) int { return int(p.left[p.index[p.items[i].ID]]) }

// advance moves the cursor past the items with no copies left.
func (p *plan) advance() {
	for p.cursor < len(p.items) && p.leftAt(p.cursor) == 0 {
		p.cursor++
	}
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
	p.advance()
	pick := map[string]int{}
	taken := 0
	if stratified {
		seen := map[[2]string]bool{}
		for i := p.cursor; i < len(p.items); i++ {
			it := p.items[i]
			k := [2]string{it.Target, it.Group}
			if seen[k] || p.leftAt(i) == 0 {
				continue
			}
			seen[k] = true
			pick[it.ID]++
			taken++
		}
	}
	for i := p.cursor; i < len(p.items) && taken < n; i++ {
		id := p.items[i].ID
		if int(p.index[id]) != i {
			continue // a later item of the same id: its copies are the first's
		}
		if more := min(int(p.left[i])-pick[id], n-taken); more > 0 {
			pick[id] += more
			taken += more
		}
	}
	return pick
}
