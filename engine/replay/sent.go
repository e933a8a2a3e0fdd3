package replay

import (
	"github.com/stroma/dlqbot/engine"
)

// What a step keeps of the copies it sent, per copy: a whole replay of
// 1,000,000 sends them in one step where it reads without a cursor, so a
// string or a map entry per copy is most of its memory.

// sentItems are the copies a move handed to MoveRequest.OnSent, kept as
// their plan items (4 bytes each) instead of Moved (56 bytes and two
// strings each); pass books them once the move has ended.
type sentItems struct {
	p     *engine.Plan
	items []int32
	// other are the copies of an id the plan does not hold, or sent to
	// another target than the plan's (none, in a step's pass): as sent.
	other []engine.Moved
}

// add keeps batch (MoveRequest.OnSent).
func (s *sentItems) Add(batch []engine.Moved) {
	for _, m := range batch {
		if i, ok := s.p.Index.Get(m.ID); ok && s.p.Classes[s.p.Class[i]][0] == m.Target {
			s.items = append(s.items, i)
			continue
		}
		s.other = append(s.other, m)
	}
}

// each calls fn with the id and target of every copy kept.
func (s *sentItems) each(fn func(id, target string)) {
	for _, i := range s.items {
		fn(s.p.IDs[i], s.p.Classes[s.p.Class[i]][0])
	}
	for _, m := range s.other {
		fn(m.ID, m.Target)
	}
}

// sentSet are the ids a step sent or may have sent (settleClaims keeps
// their claims): a bit for each of the plan's items, a map for any other
// id.
type sentSet struct {
	p     *engine.Plan
	bits  []uint64 // by the id's first item; made at the first add
	other map[string]bool
}

// newSentSet is an empty set of p's ids.
func newSentSet(p *engine.Plan) *sentSet { return &sentSet{p: p} }

// add puts id in the set.
func (s *sentSet) Add(id string) {
	if s.p != nil {
		if i, ok := s.p.Index.Get(id); ok {
			if s.bits == nil {
				s.bits = make([]uint64, (len(s.p.IDs)+63)/64)
			}
			s.bits[i/64] |= 1 << (i % 64)
			return
		}
	}
	if s.other == nil {
		s.other = map[string]bool{}
	}
	s.other[id] = true
}

// has reports whether id is in the set (a nil set holds none).
func (s *sentSet) Has(id string) bool {
	if s == nil {
		return false
	}
	if s.p != nil {
		if i, ok := s.p.Index.Get(id); ok {
			return s.bits != nil && s.bits[i/64]&(1<<(i%64)) != 0
		}
	}
	return s.other[id]
}

// bookSent books what a pass sent (kept, and mr.Unacked) and what it may
// have sent (mr.Failed): each in the step's sent set, each copy sent out
// of the plan and counted per target in sentPer. It returns the copies
// sent.
func (rn *run) bookSent(kept *sentItems, mr engine.MoveResult, sentPer map[string]int) int {
	sent := 0
	book := func(id, target string) {
		rn.stepSent.Add(id)
		rn.plan.Drop(id, 1)
		sentPer[target]++
		sent++
	}
	kept.each(book)
	for _, m := range mr.Unacked {
		book(m.ID, m.Target)
	}
	for _, f := range mr.Failed {
		if !f.Kind.NotSent() {
			rn.stepSent.Add(f.ID) // maybe sent: another replay must not send it
		}
	}
	return sent
}
