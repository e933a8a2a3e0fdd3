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

// Ledger records every confirmed send and answers "was this replayed?".
type Ledger interface {
	// Intend records entries as pending before they are published.
	Intend(ctx context.Context, entries []LedgerEntry) error
	// Confirm records entries as confirmed sends; called before the DLQ
	// originals are acked.
	Confirm(ctx context.Context, entries []LedgerEntry) error
	// Abandon withdraws pending intents whose copies were certainly not
	// sent (never published, unroutable, nacked).
	Abandon(ctx context.Context, entries []LedgerEntry) error
	// History returns, per message id of dlq, the replays that sent it,
	// newest first.
	History(ctx context.Context, dlq string, ids []string) (map[string][]Sent, error)
	// Entries returns everything replayID recorded, in send order.
	Entries(ctx context.Context, replayID string) ([]LedgerEntry, error)
}
