package engine

import (
	"maps"
	"math"
)

// plan tracks which copies of a frozen multiset are still to be sent and
// picks each canary step's messages. It is arrays over the frozen items
// (in DLQ order) with a cursor, and one id → item index (plan_index.go):
// no map per purpose, nothing copied per item. It keeps of each item only
// its id, its class, its DLQ position and its copies (about 50 bytes with
// the index, where an Item alone takes 64), so that a run need not keep
// its preview's items (engine/replay/runner.go).
type Plan struct {
	IDs     []string    `json:"-"` // DLQ order
	Class   []uint32    `json:"-"` // each item's class, an index into classes
	Seq     []int32     `json:"-"` // each item's DLQ position when previewed
	Classes [][2]string `json:"-"` // target × failure group
	Index   idIndex     `json:"-"` // id → its first item
	// left is, at an id's first item, its copies not yet sent (0 at any
	// later item of the same id: a preview's items have distinct ids, an
	// older token might not); count, there, its copies previewed.
	left  []int32
	count []int32
	total int // sum of left
	// cursor is the first item whose id still has copies left; every item
	// before it has none.
	cursor int
	// reached are the classes (target × failure group) a step has picked
	// a copy of.
	reached map[[2]string]bool
	// reach is how deep the preview read to find every item: one past the
	// largest DLQ position (see holdBound).
	Reach int `json:"-"`
	// canaryDepth is how deep, in DLQ positions as the preview saw them,
	// a first step looks for classes to hold one copy of each (see next;
	// Config.CanaryDepth); 0 or less: it looks for none.
	CanaryDepth int `json:"-"`
}

// planOf is the plan of a preview's items given column by column (which
// it keeps: the ids, classes and positions are not copied), with sent
// copies already sent (by id). The id index, most of a large plan's
// making, is built beside the rest.
func PlanOf(c ItemColumns, sent map[string]int) *Plan {
	n := c.Len()
	p := &Plan{IDs: c.IDs, Class: c.Class, Seq: c.Seq, Classes: c.Classes, count: c.Count,
		left: make([]int32, n), reached: map[[2]string]bool{}, Index: NewIDIndex(c.IDs)}
	indexed := make(chan bool, 1)
	go func() { indexed <- p.Index.Distinct() }()
	for i, s := range c.Seq {
		p.Reach = max(p.Reach, int(s)+1)
		left := c.Count[i]
		if len(sent) > 0 {
			left -= int32(sent[c.IDs[i]])
		}
		if left > 0 {
			p.left[i] = left
			p.total += int(left)
		}
	}
	if !<-indexed {
		p.repeated(sent)
	}
	// An earlier run's reads reached every class up to the last copy it
	// sent (DLQ order).
	last := -1
	for i := 0; len(sent) > 0 && i < len(p.IDs); i++ {
		if sent[p.IDs[i]] > 0 {
			last = i
		}
	}
	for i := range last + 1 {
		p.reached[p.Classes[p.Class[i]]] = true
	}
	return p
}

// repeated redoes the index, counts and copies left of a plan whose ids
// repeat (an older token's), as plans always did: each item's copies, less
// its id's sent ones, are counted at its id's first item, and later items
// have none of their own.
func (p *Plan) repeated(sent map[string]int) {
	count := make([]int32, len(p.IDs))
	clear(p.left)
	p.total = 0
	for i, id := range p.IDs {
		first, ok := p.Index.Get(id)
		if !ok {
			first = int32(i)
			p.Index.Add(id, first)
		}
		count[first] += p.count[i]
		if left := p.count[i] - int32(sent[id]); left > 0 {
			p.left[first] += left
			p.total += int(left)
		}
	}
	p.count = count
}

// distinct indexes the plan's ids when they are distinct (a preview's
// are), one write per id, and reports true; on a repeated id (an older
// token's) it leaves the index empty and reports false, and planOf writes
// it the slower way, an id's first item first. At 1,000,000 items the
// index is most of a run's start before its first copy.
func (x *idIndex) Distinct() bool {
	for i, id := range x.ids {
		if !x.Add(id, int32(i)) {
			x.reset()
			return false
		}
	}
	return true
}

// previewed is how many copies of id the preview froze (0 for an id not
// in the plan).
func (p *Plan) Previewed(id string) int {
	if i, ok := p.Index.Get(id); ok {
		return int(p.count[i])
	}
	return 0
}

// remaining is how many copies are still to be sent.
func (p *Plan) Remaining() int { return p.total }

// drop removes n copies of id from what is left (sent, or given up on).
func (p *Plan) Drop(id string, n int) {
	i, ok := p.Index.Get(id)
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
func (p *Plan) Has(id string) bool {
	_, ok := p.Index.Get(id)
	return ok
}

// target returns id's target queue ("" for an id not in the plan).
func (p *Plan) Target(id string) string {
	if i, ok := p.Index.Get(id); ok {
		return p.Classes[p.Class[i]][0]
	}
	return ""
}

// leftOf is how many copies of id are still to be sent (0 for an id not
// in the plan).
func (p *Plan) LeftOf(id string) int {
	if i, ok := p.Index.Get(id); ok {
		return int(p.left[i])
	}
	return 0
}

// leftAt is how many copies of item i's id are still to be sent.
func (p *Plan) leftAt(i int) int {
	first, _ := p.Index.Get(p.IDs[i])
	return int(p.left[first])
}

// firstOf reports whether item i is its id's first item (the one that
// counts the id's copies).
func (p *Plan) firstOf(i int) bool {
	first, _ := p.Index.Get(p.IDs[i])
	return int(first) == i
}

// advance moves the cursor past the items with no copies left.
func (p *Plan) advance() {
	for p.cursor < len(p.IDs) && p.leftAt(p.cursor) == 0 {
		p.cursor++
	}
}

// stepSize is the size of step k (from 1): first, doubling up to limit.
func StepSize(first, limit, k int) int {
	n := first
	for i := 1; i < k && n < limit; i++ {
		n *= 2
	}
	return min(n, limit)
}

// next picks the copies of the next step, as id → copies, in DLQ order
// from the cursor, so that a replay's steps read the DLQ once, front to
// back (see cursor.go). The first step holds one copy of every class
// (target × failure group) whose first copy lies within canaryDepth of the
// DLQ's head — that copy — and fills the rest of its n copies with the
// first ones in DLQ order; when there are more such classes than n, it
// holds one copy of each and no more. It reads as deep as its last pick:
// what it passes stays held by the cursor for the next steps. A later step
// takes n copies too, and for each class it reaches for the first time one
// copy more (its canary, up to n such), leaving that class's other copies
// it passes to the next step (up to n; past that the step ends there), so a
// class's first copy never goes out with its bulk. A resumed run counts
// as reached every class up to the last copy an earlier run sent; a step
// before any class is reached is a first step.
func (p *Plan) Next(n int, first bool) map[string]int {
	return p.Start(n, first).More(math.MaxInt)
}

// DefaultCanaryDepth is Config.CanaryDepth's default: a first step looks
// for failure classes among the first 10,000 messages of the DLQ (or the
// whole DLQ, when it holds fewer).
const DefaultCanaryDepth = 10000

// DefaultStepChunk is Config.Tune.StepChunk's default: a step of 1,000,000
// copies holds the picks, claims and move results of 10,000 at a time,
// some megabytes, instead of hundreds (docs/benchmarks.md).
const DefaultStepChunk = 10000

// stepWalk is next's walk over the items for one step, paused between the
// chunks a large step is sent in (Config.Tune.StepChunk): the chunks of one
// walk together pick exactly what next would.
type StepWalk struct {
	p                      *Plan
	n                      int
	first                  bool
	i                      int // the next item to look at
	taken, extra, deferred int
	fresh                  map[[2]string]bool // classes this step reached first
	// owed are the classes a first step still holds no copy of whose
	// first copy lies within canaryDepth (each is owed its first copy).
	owed map[[2]string]bool
	Done bool `json:"-"` // the step has all its copies
}

// start begins the walk of a step of n copies (see next).
func (p *Plan) Start(n int, first bool) *StepWalk {
	p.advance()
	// A run resumed before any copy was sent starts as a first step.
	w := &StepWalk{p: p, n: n, first: first || len(p.reached) == 0, i: p.cursor, fresh: map[[2]string]bool{}}
	if w.first {
		w.owed = p.canaryClasses()
	}
	return w
}

// canaryClasses are the classes not yet reached with copies left whose
// first such copy lies within canaryDepth: the ones a first step owes a
// copy.
func (p *Plan) canaryClasses() map[[2]string]bool {
	owed := map[[2]string]bool{}
	for i := p.cursor; i < len(p.IDs) && int(p.Seq[i]) < p.CanaryDepth; i++ {
		if !p.firstOf(i) || p.left[i] == 0 {
			continue
		}
		if k := p.Classes[p.Class[i]]; !p.reached[k] {
			owed[k] = true
		}
	}
	return owed
}

// full reports whether the step has all its copies: n of them and, for a
// first step, a copy of each class it owes one (or the walk is past
// canaryDepth, where none of them lie any more).
func (w *StepWalk) full() bool {
	if w.i >= len(w.p.IDs) {
		return true
	}
	if w.taken < w.n {
		return false
	}
	return len(w.owed) == 0 || int(w.p.Seq[w.i]) >= w.p.CanaryDepth
}

// more continues the walk until it has picked at least max more copies
// or the step is complete, and returns those copies (id → copies).
func (w *StepWalk) More(max int) map[string]int {
	pick := map[string]int{}
	w.walk(max, func(id string, n int) { pick[id] += n })
	return pick
}

// count reports, without moving the walk, how many copies the rest of the
// step will pick and the targets they go to.
func (w *StepWalk) Count() (copies int, targets map[string]bool) {
	reached := maps.Clone(w.p.reached)
	defer func() { w.p.reached = reached }()
	c := *w
	c.fresh, c.owed = maps.Clone(w.fresh), maps.Clone(w.owed)
	targets = map[string]bool{}
	c.walk(math.MaxInt, func(id string, n int) {
		copies += n
		targets[w.p.Target(id)] = true
	})
	return copies, targets
}

// walk is the loop of next: add is called for each copy picked.
func (w *StepWalk) walk(limit int, add func(id string, n int)) {
	p, got := w.p, 0
	for ; !w.Done && got < limit; w.i++ {
		if w.full() {
			w.Done = true
			return
		}
		id := p.IDs[w.i]
		if !p.firstOf(w.i) || p.left[w.i] == 0 {
			continue // a later item of the same id: its copies are the first's
		}
		k := p.Classes[p.Class[w.i]]
		if w.first {
			// One copy of each owed class, its first; the first copies in
			// DLQ order up to n, less the room the owed classes keep.
			take := 0
			if w.owed[k] {
				delete(w.owed, k)
				take = 1
			}
			room := w.n - w.taken - take - len(w.owed)
			take += max(0, min(int(p.left[w.i])-take, room))
			if take == 0 {
				continue // passed: held by the cursor for the next steps
			}
			p.reached[k] = true
			add(id, take)
			got += take
			w.taken += take
			continue
		}
		if !p.reached[k] {
			if w.extra == w.n {
				w.Done = true
				return
			}
			p.reached[k], w.fresh[k] = true, true
			add(id, 1)
			got++
			w.extra++
			if p.left[w.i] > 1 {
				w.deferred++ // its other copies wait for the next step
			}
			continue
		}
		if w.fresh[k] {
			if w.deferred == w.n {
				w.Done = true
				return
			}
			w.deferred++
			continue
		}
		p.reached[k] = true
		more := min(int(p.left[w.i]), w.n-w.taken)
		add(id, more)
		got += more
		w.taken += more
	}
	if w.full() {
		w.Done = true
	}
}

// depth is how many DLQ messages a read must pass to find the copies of
// pick: one past the DLQ position of the last of them.
func (p *Plan) depth(pick map[string]int) int {
	d := 0
	for id := range pick {
		if i, ok := p.Index.Get(id); ok {
			d = max(d, int(p.Seq[i])+1)
		}
	}
	return d
}

// copiesIn is how many copies pick holds.
func CopiesIn(pick map[string]int) int {
	n := 0
	for _, c := range pick {
		n += c
	}
	return n
}
