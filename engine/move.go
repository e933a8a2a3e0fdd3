package engine

import (
	"context"
	"time"

	"github.com/stroma/dlqbot/engine/letter"
)

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
	// Later, returned with ok=false, says a later step wants the message:
	// a Cursor keeps it in memory and offers it to the next move first.
	Later bool
	// Drop, returned with ok=true, acks the message without sending a
	// copy: the ledger holds its copy as confirmed (sent by an earlier
	// run whose ack of this original a lost connection did not carry).
	// Only ID is needed beside it.
	Drop bool
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

// RefusedMove is a picked message Intend refused, and the replay that
// sent it.
type RefusedMove struct {
	Moved
	By string
}

// MoveRequest describes one pass over a DLQ that sends some messages.
type MoveRequest struct {
	// Queue is the DLQ.
	Queue string
	// Pick is called for each message in queue order; ok=false leaves the
	// message in place. Pick must not keep m.Body.
	Pick func(m letter.Message) (p Pick, ok bool)
	// Satisfied, when set, is checked after each message: true ends the
	// read early (nothing further is needed from this pass).
	Satisfied func() bool
	// Rewrite returns the headers of the copy sent for p (see
	// ReplayHeaders), in a map of their own: the mover adds its own header
	// to it rather than copy it once more.
	Rewrite func(h map[string]any, p Pick) map[string]any
	// Window is the most unconfirmed publishes in flight (default 500).
	Window int
	// Rate paces publishes in messages per second; 0 means unpaced.
	Rate float64
	// Pace, when set, is called before each publish and gives the rate for
	// it (messages per second; <=0 unpaced), in place of Rate: an auto-
	// paced replay's controller (pacer.go).
	Pace func() float64
	// Continue is called before each publish; a non-nil error stops
	// publishing (pause, cancel, lost lease). In-flight copies are still
	// confirmed and their originals acked; the rest stay in the DLQ.
	Continue func() error
	// Intend is called with each batch before it is published (ledger
	// intent, fencing); an error stops the move before that batch. The
	// ids it refuses (id → the replay that sent them) are not published:
	// their copies are reported Refused and their originals stay.
	Intend func(ctx context.Context, batch []Moved) (refused map[string]string, err error)
	// Confirmed is called with confirmed copies before their originals are
	// acked; an error leaves those originals in the DLQ and stops the move.
	Confirmed func(ctx context.Context, batch []Moved) error
	// OnSent, when set, is handed each batch of copies as they become
	// Sent (confirmed, recorded, their originals' acks handled by the
	// broker), on the goroutine that called Move and before it returns;
	// MoveResult.Sent then stays empty and SentN counts them. It must not
	// keep the batch. A step of a million copies keeps what it books of
	// each (engine/replay/sent.go) instead of a list of them all.
	OnSent func(batch []Moved)
}

// MoveResult summarises a pass.
type MoveResult struct {
	Read int     // messages read from the DLQ
	Sent []Moved // confirmed and recorded; original acked (see OnSent)
	// SentN is how many copies were Sent: len(Sent), or all those handed
	// to MoveRequest.OnSent.
	SentN int
	// Unacked are copies confirmed and recorded whose originals could not be
	// acked (the connection was lost): the broker requeues those originals in
	// the DLQ, so each is a duplicate, visible in the ledger.
	Unacked []Moved
	// Unsent were handed to Intend but never published (the move stopped
	// first): certainly not sent.
	Unsent []Moved
	Failed []MoveFailure // picked but not delivered; original left in place
	// Refused were picked and refused by Intend (another replay sent
	// them): never published, their originals left in place.
	Refused []RefusedMove
	// Dropped are the originals Pick dropped (Pick.Drop) whose acks the
	// broker is known to have handled: gone from the DLQ, no copy sent.
	Dropped []Moved
	Stopped error // why publishing stopped early (Continue/Intend), if it did
	// Coverage is how much of the DLQ the pass read. A pass that ended
	// once every picked message was found is Cut, not Whole.
	Coverage Coverage
}

// Mover performs confirm-then-ack passes over a DLQ.
type Mover interface {
	Move(ctx context.Context, req MoveRequest) (MoveResult, error)
}

// Cursor is one read of a DLQ that lives across moves: each Move continues
// from where the last one stopped, offering first the messages an earlier
// move was told a later step wants (Pick.Later), and what no move takes
// stays held (unacknowledged: no other read sees it, and the DLQ's order is
// kept) until Release gives it all back, in order. A Cursor is used by one
// goroutine, except Release, which may come from another.
type Cursor interface {
	// Move is Mover.Move continued from the cursor. Its Coverage is the
	// read's since the cursor opened. After an error the cursor is
	// released.
	Move(ctx context.Context, req MoveRequest) (MoveResult, error)
	// Held is how many messages of the DLQ the cursor holds, as the
	// broker counts them (read or prefetched, neither moved nor given
	// back): they are not in the DLQ's ready count.
	Held() int
	// Done reports whether the read has ended (it saw every message
	// ready when it opened, or the broker had none left for it).
	Done() bool
	// Release gives back everything held, in order, and ends the read;
	// it reports how many messages it gave back.
	Release() (int, error)
}

// CursorMover is a Mover that can also keep one read open across moves.
type CursorMover interface {
	Mover
	OpenCursor(ctx context.Context, queue string) (Cursor, error)
}

// ReadKeeper is a Mover that can keep an approval's read of a DLQ for the
// run of the replay it approves: the run's cursor then starts from that
// read instead of reading the DLQ once more. What the read saw is offered
// to the cursor's first move in DLQ order, as a cursor's kept messages are
// (Cursor), and what it held stays held meanwhile, so nothing the approval
// compared can change before the run sends it.
type ReadKeeper interface {
	// ScanKeep is Broker.Scan, except that a read that saw the whole DLQ
	// and could keep what it saw within its bounds is kept under key
	// (kept true) instead of given back. TakeKept hands it over; after
	// ttl untaken it is given back.
	ScanKeep(ctx context.Context, queue, key string, ttl time.Duration, visit func(Message) error) (info ScanInfo, kept bool, err error)
	// TakeKept hands over the read kept under key as a cursor on queue
	// (ok false: none is kept under key for queue).
	TakeKept(key, queue string) (c Cursor, ok bool)
	// DropKept gives back the read kept under key, if any.
	DropKept(key string)
}

// PossibleDuplicateHeader marks a copy sent again because the first one
// was in doubt (in flight when the connection was lost): it carries the
// same message_id and x-dlqbot-copy as the copy that may already have
// arrived, so a consumer that sees both drops the second.
const PossibleDuplicateHeader = "x-dlqbot-possible-duplicate"

// A replay whose DLQ has no tap (it is fed through the default exchange)
// finds returns with its cursor instead of re-reading the DLQ at every
// step. The cursor sees every message of the DLQ once: those ready when it
// opened, through the steps' moves, and then everything that arrives
// behind them — copies that came back among it — through its tail
// consumer (TailCursor), holding all of it unacked until it is released.
// So a step's look for returns reads on to the DLQ's tail (what its moves
// have not reached yet, kept for later steps as they would be anyway) and
// then only what arrived since the last look.
//
// What the cursor saw is counted as a re-read counts the whole DLQ: a copy
// carrying this replay's id and a new death beyond the copies of its id
// seen before is a new return (rn.returnedSeen, shared with the re-reads,
// so a new cursor that meets returns counted by an earlier one counts none
// of them again). New failures are the messages without the replay's id
// that died since it was created and that the cursor saw.
//
// When the cursor cannot tell — another consumer on the DLQ, a read that
// ended short, a lost channel, a tail that does not come to rest within
// tailWait, or reading on would keep more than tailKeep planned messages
// in memory — the look falls back to re-reading the whole DLQ
// (rereadReturns), which says "could not tell" when it cannot either.
//
// The tail takes whatever becomes ready in the DLQ while it looks: beside
// returns and new dead letters, what another dlqbot replay of the same DLQ
// gives back — its picks, which it would then wait for. So the tail is
// never used while another dlqbot replay reads the DLQ (liveReaders: its
// claims or its reading mark): the look re-reads instead, marked and
// giving way as every run's re-read does (engine/replay/settle_scan.go). A replay that
// began reading during the look finds the cursor given back right after
// it (what the tail saw is counted first), and until then the run's
// reading mark names it, never "another client". And the look never makes
// anyone wait long: a tail that has not come to rest within tailWait is
// given back, and the look re-reads.

// TailCursor is a Cursor that keeps consuming what arrives at the DLQ
// behind the messages ready when it opened.
type TailCursor interface {
	Cursor
	// Arrivals calls visit with every message that arrived behind the
	// cursor's read and that no earlier call saw, and holds them until
	// Release (which gives them back after everything else). The read must
	// have ended (Done). It returns an error wrapping ErrHeldElsewhere
	// when it cannot have seen every arrival (another consumer on the
	// DLQ, a read that ended short); after any other error the cursor is
	// released.
	Arrivals(ctx context.Context, visit func(Message)) error
}
