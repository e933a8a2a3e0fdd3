package engine

import (
	"time"

	"github.com/stroma/dlqbot/engine/letter"
)

func LatestDeath(m letter.Meta) time.Time {
	if !m.LastDeath.IsZero() {
		return m.LastDeath
	}
	return m.FirstDeath
}

// diedAfterSecondOf reports whether m was dead-lettered in a second after
// t's. The broker keeps death times to the second, and an approval can
// fall in the same second as the last dead-lettering the preview saw: an
// original that died then is the one previewed, not a failure since. (A
// new death within that first second would need another client to have
// taken the original, had it fail and dead-lettered it before the replay
// sent anything it could be judged by.)
func DiedAfterSecondOf(m letter.Meta, t time.Time) bool {
	d := LatestDeath(m)
	return !d.IsZero() && d.Truncate(time.Second).After(t.Truncate(time.Second))
}
