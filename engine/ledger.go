package engine

import (
	"context"
	"time"
)

// LedgerEntry records one copy a replay sent (or was about to send).
type LedgerEntry struct {
	ReplayID string    `json:"replay_id"`
	DLQ      string    `json:"dlq"` // the queue the original was taken from
	ID       string    `json:"id"`
	Target   string    `json:"target"`
	Seq      int       `json:"seq"`
	At       time.Time `json:"at"`
	// Pending is true for an intent written before publishing and not yet
	// confirmed: after a crash it marks a copy that may have been sent.
	Pending bool `json:"pending,omitempty"`
	// Copy is the copy's x-dlqbot-copy header ("" in entries written
	// before it was recorded): a resend of a copy in doubt carries it again,
	// so a consumer sees both as one copy.
	Copy string `json:"copy,omitempty"`
}

// Sent summarises a message id's replay history.
type Sent struct {
	ReplayID string    `json:"replay_id"`
	At       time.Time `json:"at"`
	Count    int       `json:"count"`
	Approver string    `json:"approver,omitempty"`
}

// Window is one batch of copies a run is about to publish: the ledger
// writes its intents in one step, fenced by the run's lease.
type Window struct {
	ReplayID string
	DLQ      string
	// Owner and Epoch are the run's lease (Leases.Acquire): a window of an
	// owner that no longer holds the lease, or of an older epoch, is
	// refused whole with ErrLeaseLost and nothing of it is recorded.
	Owner string
	Epoch int64
	// Since is when the replay's preview was made: an id another replay
	// sent, or may have sent (a pending intent), at or after it is refused.
	Since time.Time
	// Entries are the copies, pending.
	Entries []LedgerEntry
	// Resend marks a window of copies in doubt sent again: their intents
	// are recorded already, so the window is only fenced and counted as
	// sent in the DLQ's history, never refused.
	Resend bool
}

// Ledger records every confirmed send and answers "was this replayed?".
type Ledger interface {
	// IntendWindow checks w's fence, refuses the ids of w another replay
	// sent or is sending since w.Since, and records the other entries as
	// pending before they are published. refused maps each refused id to
	// the replay that sent it; none of its copies is recorded.
	IntendWindow(ctx context.Context, w Window) (refused map[string]string, err error)
	// Confirm records entries as confirmed sends; called before the DLQ
	// originals are acked. An entry with a Copy confirms the intent of
	// that copy.
	Confirm(ctx context.Context, entries []LedgerEntry) error
	// Abandon withdraws pending intents whose copies were certainly not
	// sent (never published, unroutable, nacked).
	Abandon(ctx context.Context, entries []LedgerEntry) error
	// History returns, per message id of dlq, the replays that sent it,
	// newest first.
	History(ctx context.Context, dlq string, ids []string) (map[string][]Sent, error)
	// EntriesPage returns a page of what replayID recorded, in send order,
	// starting at from (0 for the first page): confirmed sends, and
	// intents not (yet) confirmed flagged Pending. next is where the next
	// page starts, negative after the last page. Pages are bounded, so a
	// reader never holds the whole ledger of a large replay at once.
	EntriesPage(ctx context.Context, replayID string, from int64) (page []LedgerEntry, next int64, err error)
}
