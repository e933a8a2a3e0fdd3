package engine

import (
	"time"

	"github.com/stroma/dlqbot/engine/letter"
)

// Problem is one thing that would go wrong, with how many messages it hits.
type Problem struct {
	Kind     ProblemKind `json:"kind"`
	Queue    string      `json:"queue,omitempty"`
	Messages int         `json:"messages"`
	Detail   string      `json:"detail"`
	// InvalidTargets counts, of a no_target problem's messages, those
	// whose headers name a queue that is not a valid queue name
	// (Meta.BadTarget).
	InvalidTargets int `json:"invalid_targets,omitempty"`
}

// TargetView summarises the selected messages bound for one queue.
type TargetView struct {
	Queue     string                `json:"queue"`
	Exists    bool                  `json:"exists"`
	Consumers int                   `json:"consumers"`
	Messages  int                   `json:"messages"`
	Reasons   map[letter.Reason]int `json:"reasons"`
	// ConsumersSinceFailure says whether the queue's consumers connected
	// after LastFailure, the latest time its selected messages failed
	// (see engine/review/preview_targets.go); ConsumerConns are the consumers' connections
	// as the management API lists them (empty when it was not asked or
	// could not tell). Json "consumers_since_failure", "last_failure",
	// "consumer_connections".
	ConsumersSinceFailure Since          `json:"consumers_since_failure"`
	LastFailure           time.Time      `json:"last_failure,omitzero"`
	ConsumerConns         []ConsumerConn `json:"consumer_connections,omitempty"`
	// MixedScripts is set when the queue's name mixes the letters of
	// scripts that look alike (MixedScripts names them): it may read as
	// another queue's name. Json "mixed_scripts", absent when false.
	MixedScripts bool `json:"mixed_scripts,omitempty"`
}

// Since says whether a target's consumers were restarted since its
// messages failed (TargetView.ConsumersSinceFailure).
type Since string

// The verdicts on a target's consumers.
const (
	// SinceRestarted: some consumer's connection opened after the latest
	// failure.
	SinceRestarted Since = "restarted"
	// SinceUnchanged: every consumer's connection was open before the
	// latest failure: the processes that failed the messages are likely
	// the ones still running.
	SinceUnchanged Since = "unchanged"
	// SinceNone: the target has no consumers (or does not exist).
	SinceNone Since = "none"
	// SinceUnknown: the messages carry no failure time, or the management
	// API could not say (down, slow, lagging, or a connection opened in
	// the very second of the failure).
	SinceUnknown Since = "unknown"
)

// PreviewMessage is one distinct selected (or parked) message.
type PreviewMessage struct {
	letter.Meta
	Count    int    `json:"count"`
	Target   string `json:"target,omitempty"`
	Parked   bool   `json:"parked,omitempty"`
	Replayed []Sent `json:"replayed,omitempty"`
}

// Preview is what a replay of a selection would do. Making one changes nothing.
type Preview struct {
	// proof is what the token freezes for its approval (Frozen.Proof).
	Proof     *ApprovalProof `json:"-"`
	Token     string         `json:"token,omitempty"`
	ExpiresAt string         `json:"expires_at,omitempty"`
	DLQ       QueueInfo      `json:"dlq"`
	Selection string         `json:"selection"`
	Requester string         `json:"requester"`
	Scanned   int            `json:"scanned"`
	// Coverage is how much of the DLQ the scan saw; a scan that could not
	// see all of it leads the problems with ProblemPartialRead, and the
	// token covers only what was read.
	Coverage Coverage `json:"coverage"`
	Selected int      `json:"selected"` // copies in the token
	// FirstStepDepth is how many messages of the DLQ, from its head, the
	// replay's first step (of DefaultStep messages, and a copy of every
	// class within Config.CanaryDepth) must read: one past the DLQ
	// position of its last copy. The steps read on from there, once in
	// all (see cursor.go). 0 when nothing is selected.
	FirstStepDepth int `json:"first_step_depth"`
	// CanaryClasses is how many classes (target × failure group) the
	// replay's first step holds a copy of; Classes how many the selection
	// has. Classes first met deeper than Config.CanaryDepth join in the
	// steps that reach them.
	CanaryClasses int          `json:"canary_classes"`
	Classes       int          `json:"classes"`
	Distinct      int          `json:"distinct"` // distinct ids in the token
	Parked        int          `json:"parked"`
	Problems      []Problem    `json:"problems"`
	Targets       []TargetView `json:"targets"`
	// Messages lists the first Config.Tune.ListRows distinct matching messages
	// (selected, parked or without a target) in DLQ order; Rows and
	// Matched count all of them, and their copies.
	Messages []PreviewMessage `json:"messages"`
	Rows     int              `json:"rows"`
	Matched  int              `json:"matched"`
	// Arrivals is when the selected messages were dead-lettered (see arrivals.go).
	Arrivals *Arrivals `json:"arrivals,omitempty"`
	// Budget is the DLQ's read budget; nil when reads cost no delivery
	// attempts (classic queues, no limit, RabbitMQ 4.3+).
	Budget *BudgetView `json:"read_budget,omitempty"`
	// Returns says how a replay would find the copies that come back.
	Returns ReturnsView `json:"returns"`
	// HeldByReplay, when set, names the dlqbot replays of this DLQ whose
	// reads held messages the preview could not see, and how many it
	// could not see (of Coverage.HeldElsewhere): the preview does not wait
	// for a replay's read (engine/review/readers.go), and those messages are not in its
	// token. Json "held_by_replay".
	HeldByReplay *HeldBy `json:"held_by_replay,omitempty"`
}

// ReturnsView tells a preview's reader how a replay of it would find the
// copies that come back.
type ReturnsView struct {
	// Mode is "tap" or "reread".
	Mode ReturnsMode `json:"mode"`
	// Tap is the tap queue's name (tap mode).
	Tap string `json:"tap,omitempty"`
	// Reads is how many reads of the whole DLQ a replay of the selection
	// with the default steps needs to find returns (reread mode) at most:
	// one per step where the replay's cursor cannot tell (engine/replay/settle_tail.go).
	Reads int `json:"reads,omitempty"`
	// Detail says it in words, with why the DLQ must be re-read.
	Detail string `json:"detail"`
}

// sinceVerdict compares the consumers' connections with the latest
// failure. Failure times have whole seconds (x-death's AMQP timestamp), so
// the failure happened somewhere in [last, last+1s): a connection opened
// at or after its end is a restart, one opened before its start was there
// when the message failed, and one opened within it cannot be told. With
// fewer connections listed than the broker counts consumers (the API
// lags), the ones not listed may be new: no unchanged then.
func SinceVerdict(conns []ConsumerConn, consumers int, last time.Time) Since {
	if len(conns) == 0 {
		return SinceUnknown
	}
	start := last.Truncate(time.Second)
	end := start.Add(time.Second)
	before := true
	for _, c := range conns {
		if !c.ConnectedAt.Before(end) {
			return SinceRestarted
		}
		if c.ConnectedAt.IsZero() || !c.ConnectedAt.Before(start) {
			before = false
		}
	}
	if !before || len(conns) < consumers {
		return SinceUnknown
	}
	return SinceUnchanged
}
