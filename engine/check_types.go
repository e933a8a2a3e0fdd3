package engine

import (
	"fmt"
	"time"
)

// CheckGroup is one kind of failure among a replay's returned copies.
type CheckGroup struct {
	// Group is the normalised exception text, else the dead-letter reason.
	Group string `json:"group"`
	// Type is the group's exception type, else its dead-letter reason
	// (see FailureType): what a channel is shown instead of Group.
	Type string `json:"type,omitempty"`
	// Count is how many returned copies are in the group.
	Count int `json:"count"`
	// ExampleID is the id of one returned copy in the group.
	ExampleID string `json:"example_id"`
	// Reason is the new dead-letter reason of the example.
	Reason string `json:"reason,omitempty"`
	// Example is the example's exception text as recorded (not normalised).
	Example string `json:"example,omitempty"`
}

// CheckReport answers "did the replay work?" (docs/design.md "Did it work? Check, follow-ups, parking"): of the copies a replay
// sent, how many came back to the DLQ (a copy with its replay id and a new
// death), grouped by failure. Copies not seen back are "not seen in a
// dead-letter queue" — never "processed".
type CheckReport struct {
	ReplayID string    `json:"replay_id"`
	DLQ      string    `json:"dlq"`
	At       time.Time `json:"at"`
	// Replayed is how many copies the replay sent.
	Replayed int `json:"replayed"`
	// Returned is how many of them came back.
	Returned int `json:"returned"`
	// Groups covers only the returned copies, largest first.
	Groups []CheckGroup `json:"groups"`
	// NewFailures counts messages dead-lettered since the replay started
	// without its id: failures that are not returns.
	NewFailures int `json:"new_failures"`
	// AtParkLimit counts returned copies replayed park_after times or more;
	// ParkIDs lists their ids (they can be moved to the parking queue).
	AtParkLimit int      `json:"at_park_limit"`
	ParkIDs     []string `json:"park_ids,omitempty"`
	ParkAfter   int      `json:"park_after"`
	// Label names a scheduled follow-up ("+5m"), "" for an on-demand check.
	Label string `json:"label,omitempty"`
	// Unseen, when set, says for how many copies the check could not tell
	// whether they came back: the DLQ's tap was gone for a while and the
	// DLQ could not be re-read in its place. Returned then counts only
	// what was seen, and is never to be read as "none came back".
	Unseen *Unseen `json:"unseen,omitempty"`
	// HeldByReplay, when set, names the dlqbot replays whose reads held
	// messages of the DLQ the check's read could not see: it does not
	// wait for them, and copies among them are not counted. Json
	// "held_by_replay".
	HeldByReplay *HeldBy `json:"held_by_replay,omitempty"`
}

// Unseen names copies whose return nobody could see: the DLQ's tap was
// missing from From to To (To zero: still missing) and the counted
// re-read of the DLQ that reconciles such a window was impossible (the
// read budget refused it, say).
type Unseen struct {
	// Count is how many copies sent could have come back unseen: sent
	// before the tap came back, and not seen back.
	Count int `json:"count"`
	// From is when the tap was last known to exist; To when it was
	// declared again (zero while it is still gone).
	From time.Time `json:"from"`
	To   time.Time `json:"to,omitzero"`
}

// unseenTime is how Words writes the window's ends (UTC, to the
// millisecond: a window is often shorter than a second).
const UnseenTime = "2006-01-02T15:04:05.000Z07:00"

// Words says it for a person: "could not tell for 8 copies (the tap was
// gone from 2026-12-01T10:00:00.120Z to 2026-12-01T10:00:00.480Z)".
func (u Unseen) Words() string {
	s := fmt.Sprintf("could not tell for %d %s (the tap was gone from %s", u.Count, pick(u.Count, "copy", "copies"), u.From.UTC().Format(UnseenTime))
	if u.To.IsZero() {
		return s + " and is still gone)"
	}
	return s + " to " + u.To.UTC().Format(UnseenTime) + ")"
}

func pick(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
