package engine

// The kinds below are the words the engine uses to say what went wrong or
// what changed. Their values appear in the JSON of previews, approvals and
// replays (the API, --json output and the MCP tools); api/openapi.yaml
// lists each set, and a test there fails when a list and these constants
// disagree. Compare kinds with these constants, never with string literals.

// ProblemKind names one thing a preview says would go wrong (Problem.Kind).
type ProblemKind string

// Problem kinds a preview leads with, most serious first.
const (
	ProblemTargetMissing   ProblemKind = "target_missing"   // the target queue does not exist
	ProblemNoTarget        ProblemKind = "no_target"        // the source cannot be derived; needs to=
	ProblemNoConsumers     ProblemKind = "no_consumers"     // the target has no live consumer
	ProblemAlreadyReplayed ProblemKind = "already_replayed" // a replay already sent this message
	ProblemParked          ProblemKind = "parked"           // left out: replayed park_after times
	ProblemDeliveryLimit   ProblemKind = "delivery_limit"   // quorum DLQ: reads use up delivery attempts (the read budget)
	ProblemUnreadable      ProblemKind = "unreadable"       // headers that could not be read
	// ProblemRetryState: a framework marker on the messages makes their
	// consumer refuse a replayed copy (rascal's immediateNack); the replay
	// resets it (Meta.Refusal).
	ProblemRetryState ProblemKind = "consumer_would_refuse"
	// ProblemPartialRead: the scan could not see the whole DLQ (another
	// client held or took messages); always listed first.
	ProblemPartialRead ProblemKind = "partial_read"
	// ProblemConsumersUnchanged: every consumer of a target was already
	// connected when its latest message failed (TargetView's
	// ConsumersSinceFailure is SinceUnchanged): the fix may not be live.
	// Listed first after a partial read.
	ProblemConsumersUnchanged ProblemKind = "consumers_unchanged"
)

// ChangeKind names one difference between a preview and the world at its
// approval (Change.Kind).
type ChangeKind string

// Change kinds an approval's compare reports.
const (
	ChangeMessagesGone      ChangeKind = "messages_gone"      // previewed messages no longer in the DLQ
	ChangeReplayedElsewhere ChangeKind = "replayed_elsewhere" // previewed messages sent by another replay since
	ChangeTargetDeleted     ChangeKind = "target_deleted"     // a target queue was deleted since
	ChangeConsumersGone     ChangeKind = "consumers_gone"     // a target queue lost all its consumers since
	ChangeHeldByReplay      ChangeKind = "held_by_replay"     // previewed messages another running replay is sending now
)

// FailureKind names what happened to one message a replay could not
// deliver or that came back (Failure.Kind).
type FailureKind string

// Failure kinds a replay records.
const (
	// FailureReturned: the copy was delivered and dead-lettered again (it
	// came back).
	FailureReturned FailureKind = "returned"
	// FailureUnroutable: the broker bounced the copy (a mandatory publish
	// no queue took, e.g. the target was deleted); the original stays.
	FailureUnroutable FailureKind = "unroutable"
	// FailureNacked: the broker nacked the copy; the original stays.
	FailureNacked FailureKind = "nacked"
	// FailureRefused: the copy was not published because the broker would
	// refuse it (a user_id other than dlqbot's); the original stays.
	FailureRefused FailureKind = "refused"
	// FailureMissing: a whole, quiet read of the DLQ did not find the
	// planned message (something else took it).
	FailureMissing FailureKind = "missing"
	// FailureHeldElsewhere: the planned message could not be found while
	// another client held messages of the DLQ; it stays planned.
	FailureHeldElsewhere FailureKind = "held_elsewhere"
	// FailureInDoubt: the copy was in flight when the connection was lost,
	// so it may have been delivered; it is never sent again.
	FailureInDoubt FailureKind = "in_doubt"
	// FailureReplayedElsewhere: another dlqbot replay sent the message, or
	// holds it for the step it is sending (Detail names it): not sent by
	// this replay, and not missing.
	FailureReplayedElsewhere FailureKind = "replayed_elsewhere"
	// FailureUnrecorded: the broker confirmed the copy but the ledger
	// could not record it, so its original was kept (a duplicate).
	FailureUnrecorded FailureKind = "unrecorded"
)

// notSent reports whether a failure of kind k means the copy was certainly
// not sent: the ledger does not name it, so a resumed replay plans it again.
func (k FailureKind) NotSent() bool {
	switch k {
	case FailureMissing, FailureUnroutable, FailureNacked, FailureRefused, FailureReplayedElsewhere:
		return true
	}
	return false
}

// MoveFailureKind names why the broker did not take one copy of a move
// (MoveFailure.Kind).
type MoveFailureKind string

// Move failure kinds a Mover reports.
const (
	MoveUnroutable MoveFailureKind = "unroutable" // the broker bounced the mandatory publish (e.g. target deleted)
	MoveNacked     MoveFailureKind = "nacked"     // the broker nacked the copy
	MoveRefused    MoveFailureKind = "refused"    // not published: the broker would refuse it
	MoveLost       MoveFailureKind = "lost"       // the connection or channel was lost before the confirm
	MoveUnrecorded MoveFailureKind = "unrecorded" // confirmed, but Confirmed failed: the original was kept
)

// notSent reports whether the copy was certainly not delivered (so its
// ledger intent can be withdrawn).
func (k MoveFailureKind) NotSent() bool {
	return k == MoveUnroutable || k == MoveNacked || k == MoveRefused
}

// failure is the replay failure kind a move failure of kind k is recorded
// as: a lost copy is in doubt (maybe delivered), never "not delivered".
func (k MoveFailureKind) Failure() FailureKind {
	switch k {
	case MoveLost:
		return FailureInDoubt
	case MoveUnrecorded:
		return FailureUnrecorded
	case MoveRefused:
		return FailureRefused
	case MoveNacked:
		return FailureNacked
	case MoveUnroutable:
		return FailureUnroutable
	}
	return FailureKind(k)
}
