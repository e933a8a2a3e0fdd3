package engine

import "context"

// Pick is a decision to send one DLQ message: its id and target queue.
type Pick struct {
	ID     string
	Target string
	// Source is the queue the message failed in ("" when it cannot be
	// derived): the copy's stroma.dlq.replayed_from.
	Source string
	// Copy, when set, is the x-dlqbot-copy the copy carries: a resend of a
	// copy in doubt keeps the one of the copy that may have arrived. Empty:
	// the move names the copy itself.
	Copy string
}

// Moved is one copy handed to the broker by a move.
type Moved struct {
	Seq    int    // DLQ position of the original
	ID     string // message id (Meta.ID)
	Target string
	Copy   string // the copy's x-dlqbot-copy
}

// MoveFailure is a picked message whose copy the broker did not take; its
// original stayed in the DLQ.
type MoveFailure struct {
	Moved
	Kind   MoveFailureKind
	Detail string
}

// MoveRequest describes one pass over a DLQ that sends some messages.
type MoveRequest struct {
	// Queue is the DLQ.
	Queue string
	// Pick is called for each message in queue order; ok=false leaves the
	// message in place. Pick must not keep m.Body.
	Pick func(m Message) (p Pick, ok bool)
	// Satisfied, when set, is checked after each message: true ends the
	// read early (nothing further is needed from this pass).
	Satisfied func() bool
	// Rewrite returns the headers of the copy sent for p (see ReplayHeaders).
	Rewrite func(h map[string]any, p Pick) map[string]any
	// Window is the most unconfirmed publishes in flight (default 500).
	Window int
	// Rate paces publishes in messages per second; 0 means unpaced.
	Rate float64
	// Continue is called before each publish; a non-nil error stops
	// publishing (pause, cancel, lost lease). In-flight copies are still
	// confirmed and their originals acked; the rest stay in the DLQ.
	Continue func() error
	// Intend is called with each batch before it is published (ledger
	// intent, fencing); an error stops the move before that batch.
	Intend func(ctx context.Context, batch []Moved) error
	// Confirmed is called with confirmed copies before their originals are
	// acked; an error leaves those originals in the DLQ and stops the move.
	Confirmed func(ctx context.Context, batch []Moved) error
}

// MoveResult summarises a pass.
type MoveResult struct {
	Read int     // messages read from the DLQ
	Sent []Moved // confirmed and recorded; original acked
	// Unacked are copies confirmed and recorded whose originals could not be
	// acked (the connection was lost): the broker requeues those originals in
	// the DLQ, so each is a duplicate, visible in the ledger.
	Unacked []Moved
	// Unsent were handed to Intend but never published (the move stopped
	// first): certainly not sent.
	Unsent  []Moved
	Failed  []MoveFailure // picked but not delivered; original left in place
	Stopped error         // why publishing stopped early (Continue/Intend), if it did
	// Coverage is how much of the DLQ the pass read. A pass that ended
	// once every picked message was found is Cut, not Whole.
	Coverage Coverage
}

// Mover performs confirm-then-ack passes over a DLQ.
type Mover interface {
	Move(ctx context.Context, req MoveRequest) (MoveResult, error)
}
