package engine

import (
	"context"
	"time"
)

// Claim is who holds one message id of a DLQ: the replay that claimed it
// for the step it is sending, or that sent it.
type Claim struct {
	Replay string    `json:"replay_id"`
	Sent   bool      `json:"sent"` // sent (or maybe sent: in doubt), not only claimed
	At     time.Time `json:"at"`   // when it was claimed or sent
}

// Claims hands a DLQ's messages to one replay at a time, so that replays
// whose previews overlap send each message once in all. Before each step a
// run claims the ids it picked; an id another replay claimed (for its
// current step, until the claim expires) or sent since this replay was
// approved is refused with the replay that holds it. After the step the
// run marks what it sent (or may have sent) and releases the rest.
type Claims interface {
	// Claim claims ids of dlq for replay until ttl from now, atomically
	// for the whole batch: ids another replay holds are refused (and not
	// claimed), the rest are claimed. An id sent by another replay before
	// since does not refuse (the approver saw it as already replayed).
	Claim(ctx context.Context, dlq, replay string, ids []string, since time.Time, ttl time.Duration) (refused map[string]Claim, err error)
	// Settle marks sent as sent by replay and releases replay's claims on
	// released (ids claimed and not sent).
	Settle(ctx context.Context, dlq, replay string, sent, released []string) error
	// Holders returns, for those of ids that another replay than replay
	// holds now (claimed or sent), who holds them.
	Holders(ctx context.Context, dlq, replay string, ids []string) (map[string]Claim, error)
	// Readers lists the replays other than replay with unexpired claims on
	// dlq: those sending from it now.
	Readers(ctx context.Context, dlq, replay string) ([]string, error)
}
