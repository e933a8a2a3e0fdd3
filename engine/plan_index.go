package engine

import (
	"hash/maphash"
	"math/bits"
)

// idIndex is a plan's id → item index: an open-addressed hash table of
// item indexes over the plan's own ids, which it does not copy. It takes
// 4 bytes a slot and at most 4 slots for 3 items (5–11 bytes an item),
// where a map[string]int32 of a million ids takes about 50: at 1,000,000
// items the index was most of a plan's memory.
type idIndex struct {
	ids   []string // the plan's ids: slot values index them
	Slots []int32  `json:"-"` // an item index + 1 in each used slot; 0: empty
	seed  maphash.Seed
	n     int // ids indexed
}

// newIDIndex returns an empty index over ids with room for all of them.
func NewIDIndex(ids []string) idIndex {
	size := 8
	if need := len(ids) + len(ids)/3 + 1; need > size {
		size = 1 << bits.Len(uint(need-1))
	}
	return idIndex{ids: ids, Slots: make([]int32, size), seed: maphash.MakeSeed()}
}

// find returns the slot holding id, or the empty slot where it would go.
func (x *idIndex) find(id string) int {
	mask := len(x.Slots) - 1
	s := int(maphash.String(x.seed, id)) & mask
	for {
		v := x.Slots[s]
		if v == 0 || x.ids[v-1] == id {
			return s
		}
		s = (s + 1) & mask
	}
}

// get returns id's item and whether it is indexed.
func (x *idIndex) Get(id string) (int32, bool) {
	if x.n == 0 {
		return 0, false
	}
	v := x.Slots[x.find(id)]
	return v - 1, v != 0
}

// add indexes id at item i unless id is indexed already; it reports
// whether it did. The index holds at most len(ids) ids.
func (x *idIndex) Add(id string, i int32) bool {
	s := x.find(id)
	if x.Slots[s] != 0 {
		return false
	}
	x.Slots[s] = i + 1
	x.n++
	return true
}

// reset empties the index.
func (x *idIndex) reset() {
	clear(x.Slots)
	x.n = 0
}
