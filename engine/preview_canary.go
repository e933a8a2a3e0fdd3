package engine

// The preview's account of a replay's first step: how many classes
// (target × failure group) it holds a copy of, out of how many the
// selection has, and how deep it reads. It walks the selected rows as
// plan.next walks a fresh plan's first step (TestFirstStepCoverAgreesWithPlan
// holds the two together).

// firstStepCover walks items (each's copies, class — any number naming
// one target × failure group — and DLQ position, in DLQ order) as a replay's first step of n copies that looks depth deep
// for classes: covered is how many classes the step holds a copy of,
// classes how many the items have, and read how deep the step reads (one
// past its last pick's position; 0 when it picks nothing).
func FirstStepCover(n, depth int, each func(yield func(count, class, seq int) bool)) (covered, classes, read int) {
	owed, all := map[int]bool{}, map[int]bool{}
	each(func(_, k, seq int) bool {
		all[k] = true
		if seq < depth {
			owed[k] = true
		}
		return true
	})
	picked := map[int]bool{}
	taken := 0
	each(func(count, k, seq int) bool {
		if taken >= n && (len(owed) == 0 || seq >= depth) {
			return false
		}
		take := 0
		if owed[k] {
			delete(owed, k)
			take = 1
		}
		take += max(0, min(count-take, n-taken-take-len(owed)))
		if take > 0 {
			picked[k] = true
			taken += take
			read = seq + 1
		}
		return true
	})
	return len(picked), len(all), read
}
