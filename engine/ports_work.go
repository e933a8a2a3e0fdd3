package engine

import (
	"context"
	"time"
)

// Jobs hands replays out to workers (a Redis stream with a consumer group).
// Handing out is not holding: a worker takes a replay by its lease. It is
// Deps.Jobs: optional, but Work and Enqueue need it.
type Jobs interface {
	// Enqueue asks some worker to run replayID.
	Enqueue(ctx context.Context, replayID string) error
	// Next waits up to block for a replay to run; "" when none came.
	Next(ctx context.Context, consumer string, block time.Duration) (replayID string, ack func() error, err error)
}

// Registry is where running workers announce themselves (Deps.Registry,
// needed by Work). Who reads the announcements (the terminal, to decide
// whether to run a replay itself) reads the store directly.
type Registry interface {
	// Announce says workerID runs, for ttl.
	Announce(ctx context.Context, workerID string, ttl time.Duration) error
}
