package engine

import (
	"context"
	"time"
)

// EventKind names a replay's progress events.
type EventKind string

// Progress events (issue: step started, step passed, stopped, paused,
// resumed, cancelled, finished, interrupted).
const (
	EventStarted     EventKind = "started"
	EventStepStarted EventKind = "step_started"
	EventStepPassed  EventKind = "step_passed"
	EventStopped     EventKind = "stopped"
	EventPaused      EventKind = "paused"
	EventResumed     EventKind = "resumed"
	EventCancelled   EventKind = "cancelled"
	EventFinished    EventKind = "finished"
	EventInterrupted EventKind = "interrupted"
	// EventFollowUp carries a scheduled "did it work?" check.
	EventFollowUp EventKind = "follow_up"
	// EventParked reports messages moved to the parking queue.
	EventParked EventKind = "parked"
)

// StepResult is what one canary step did and observed.
type StepResult struct {
	Step     int `json:"step"`
	Planned  int `json:"planned"`
	Sent     int `json:"sent"`
	Settled  int `json:"settled"`  // observed to have left the target queue
	Returned int `json:"returned"` // came back to the DLQ with this replay's id
	Failed   int `json:"failed"`   // unroutable / nacked / missing
	// Missing counts planned messages a whole read of the DLQ (no other
	// client holding any) did not find: they left the DLQ some other way.
	Missing int `json:"missing,omitempty"`
	// HeldElsewhere counts planned messages not found while another
	// client held messages of the DLQ: not sent, still planned.
	HeldElsewhere int `json:"held_elsewhere,omitempty"`
	// Observation says, in words that claim no more than was seen, how
	// settling was judged in the glossary's words ("all 10 settled", "none
	// of the 10 settled within 1m0s", …): settled is a copy seen leaving
	// the target queue.
	Observation string        `json:"observation"`
	Duration    time.Duration `json:"duration"`
	// Unseen, when set, names the copies whose return the step could not
	// tell (the tap was gone, and the DLQ could not be re-read instead).
	Unseen *Unseen `json:"unseen,omitempty"`
	// Evidence says what the step was judged on: EvidenceQueues, or
	// EvidenceCounters when the management API's counters added to it
	// (empty for a step that was never judged).
	Evidence Evidence `json:"evidence,omitempty"`
}

// Evidence names what a step's settling was judged on.
type Evidence string

const (
	// EvidenceQueues is what AMQP itself shows: the targets' ready counts
	// (passive declares) and the returns found through the DLQ's tap or a
	// re-read of the DLQ.
	EvidenceQueues Evidence = "queues"
	// EvidenceCounters is EvidenceQueues and the targets' management
	// counters (deliver_get, ack), which can show copies delivered
	// sooner, or prove them acked and end the step before its grace, or
	// the API's list of the targets' consumers, which can show that every
	// copy was taken with auto-ack (acked as it was delivered).
	EvidenceCounters Evidence = "queues+counters"
)

// Event is one progress event of a replay, with the record as it stood.
type Event struct {
	Kind   EventKind   `json:"kind"`
	Replay Replay      `json:"replay"`
	Step   *StepResult `json:"step,omitempty"`
	// Check is the report of a follow-up or park event.
	Check *CheckReport `json:"check,omitempty"`
	// Actor is the Slack user (or terminal user) who caused the event, when
	// a person did (pause, resume, cancel, park).
	Actor string    `json:"actor,omitempty"`
	Text  string    `json:"text"`
	At    time.Time `json:"at"`
}

// Notifier receives progress events. Implementations must not block for
// long: a slow Slack must never slow a replay.
type Notifier interface {
	Notify(ctx context.Context, e Event)
}

// NotifierFunc adapts a function to Notifier.
type NotifierFunc func(ctx context.Context, e Event)

// Notify calls f.
func (f NotifierFunc) Notify(ctx context.Context, e Event) { f(ctx, e) }

// Notifiers fans an event out to several notifiers.
type Notifiers []Notifier

// Notify calls each notifier in turn.
func (ns Notifiers) Notify(ctx context.Context, e Event) {
	for _, n := range ns {
		if n != nil {
			n.Notify(ctx, e)
		}
	}
}
