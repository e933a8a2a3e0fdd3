package engine

import "time"

// CheckGroup is one kind of failure among a replay's returned copies.
type CheckGroup struct {
	// Group is the normalised exception text, else the dead-letter reason.
	Group string `json:"group"`
	// Count is how many returned copies are in the group.
	Count int `json:"count"`
	// ExampleID is the id of one returned copy in the group.
	ExampleID string `json:"example_id"`
	// Reason is the new dead-letter reason of the example.
	Reason string `json:"reason,omitempty"`
	// Example is the example's exception text as recorded (not normalised).
	Example string `json:"example,omitempty"`
}

// CheckReport answers "did the replay work?" (README "Did it work? Check, follow-ups, parking"): of the copies a replay
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
}
