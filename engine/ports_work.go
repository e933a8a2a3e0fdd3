package engine

import (
	"context"
	"errors"
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
// needed by Work). The announcements are read through ops.HandOff (the
// terminal, deciding whether to run a replay itself), from the store.
type Registry interface {
	// Announce says workerID runs, for ttl.
	Announce(ctx context.Context, workerID string, ttl time.Duration) error
}

// Schedule holds timed work in the store: members scored by due time,
// each claimed by exactly one caller.
type Schedule interface {
	Add(ctx context.Context, member string, due time.Time) error
	ClaimDue(ctx context.Context, now time.Time, n int) ([]string, error)
}

// DefaultFollowUps are when a finished or stopped replay is checked again.
var DefaultFollowUps = []time.Duration{5 * time.Minute, 2 * time.Hour, 24 * time.Hour}

// Authorizer decides whether a worker may run a replay, by the policy the
// worker's own process loaded: whoever approved it (and, on a resume,
// whoever asked to resume it) must hold what approving needs, and the
// approval must satisfy the four-eyes rule and "needs a human". A replay
// approved by a process that applied no such policy (or another one) is
// so refused before anything is sent. WorkerConfig.Authorizer; ops
// implements it.
type Authorizer interface {
	// AuthorizeRun returns nil when r may run now; resumedBy is who asked
	// for the run when it resumes a paused or stopped replay ("" for the
	// first run of an approved one). Its error is a sentence saying why
	// not.
	AuthorizeRun(ctx context.Context, r Replay, resumedBy string) error
}

// ErrRunRefused means a worker refused to run a replay because its
// approval (or its resume) does not satisfy the worker's policy; the
// replay was left stopped, nothing sent.
var ErrRunRefused = errors.New("run refused by the worker's policy")

// WorkerConfig tunes a worker; zero values mean the defaults.
type WorkerConfig struct {
	// ID names the worker in Redis (default: a random id).
	ID string
	// Concurrency is how many replays it runs at once (default 4).
	Concurrency int
	// Block is how long one wait for work lasts (default 1s).
	Block time.Duration
	// Authorizer, when set, is asked before each run sends anything
	// whether the replay's approval (and resume) satisfies this worker's
	// policy; a refused replay is left stopped, nothing sent.
	Authorizer Authorizer
}

// ErrNotControllable means a replay's state does not allow the action.
var ErrNotControllable = errors.New("replay cannot be controlled")

// ErrNoChange tells an Updater to leave the record as it is.
var ErrNoChange = errors.New("no change")
