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

// Active lists the replays not in a final state, so that the reaper need
// not read every replay kept.
type Active interface {
	Active(ctx context.Context) ([]string, error)
}

// Owners tells who holds a replay's lease ("" when nobody does).
type Owners interface {
	Owner(ctx context.Context, replayID string) (string, error)
}

// Updater changes a replay record without owning it, atomically (optimistic
// locking): fn sees the current record and may change it; an error from fn
// (such as ErrNoChange) leaves it as it is and is returned.
type Updater interface {
	// Update changes the record whoever holds the lease.
	Update(ctx context.Context, id string, fn func(*Replay) error) error
	// UpdateUnowned changes it only while nobody holds the lease.
	UpdateUnowned(ctx context.Context, id string, fn func(*Replay) error) error
}
