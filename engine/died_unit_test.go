package engine

import (
	"github.com/stroma/dlqbot/engine/letter"
	"testing"
	"time"
)

// TestAnOriginalThatDiedInTheApprovalsSecondIsTheOriginal: the broker keeps
// death times to the second, so an original dead-lettered in the second of
// the approval is the previewed one (its ack is carried); one dead-lettered
// in a later second died since the replay began (never acked).
func TestAnOriginalThatDiedInTheApprovalsSecondIsTheOriginal(t *testing.T) {
	created := time.Date(2026, 12, 6, 9, 0, 0, 400_000_000, time.UTC)
	cases := []struct {
		name  string
		death time.Time
		since bool
	}{
		{"a second before", created.Add(-time.Second).Truncate(time.Second), false},
		{"the same second", created.Truncate(time.Second), false},
		{"the next second", created.Truncate(time.Second).Add(time.Second), true},
		{"no death", time.Time{}, false},
	}
	for _, c := range cases {
		if got := DiedAfterSecondOf(letter.Meta{LastDeath: c.death}, created); got != c.since {
			t.Errorf("%s: died since %v, want %v", c.name, got, c.since)
		}
	}
}
