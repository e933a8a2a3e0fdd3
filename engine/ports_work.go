package engine

import (
	"context"
	"time"
)

// Jobs hands replays out to workers (a Redis stream with a consumer group).
// Handing out is not holding: a worker takes a replay by its lease.
type Jobs interface {
	// Enqueue asks some worker to run replayID.
	Enqueue(ctx context.Context, replayID string) error
	// Next waits up to block for a replay to run; "" when none came.
	Next(ctx context.Context, consumer string, block time.Duration) (replayID string, ack func() error, err error)
}

// Registry is where running workers announce themselves.
type Registry interface {
	Announce(ctx context.Context, workerID string, ttl time.Duration) error
	List(ctx context.Context) ([]string, error)
}
