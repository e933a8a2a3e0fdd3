package proof

import (
	"context"
	"github.com/stroma/dlqbot/engine"
	"time"

	"github.com/rs/zerolog"
)

// Config tunes a Prover. It has no defaults of its own: the engine fills it
// from its own Config (Tune's ProofFrom, StatsLag, ProofWait and TokenTTL;
// SettlePoll, Log).
type Config struct {
	// From is the fewest messages a previewed DLQ holds for its approval
	// to try the proof instead of comparing (DefaultFrom by default).
	From int
	// StatsLag is how far the management counters lag behind their
	// sample's time: the broker's statistics interval plus a margin.
	StatsLag time.Duration
	// Wait is the most an approval waits for the statistics to catch up
	// with its preview before it compares instead.
	Wait time.Duration
	// Poll is how often the approval looks again while it waits.
	Poll time.Duration
	// TokenTTL is how long a preview token stays valid: a watch is kept
	// no longer than that.
	TokenTTL time.Duration
	// Unsupported is the error Watches.OpenWatch wraps for a DLQ that can
	// have no watch (the engine's ErrUnsupported): expected, so not
	// warned about.
	Unsupported error
	// Log receives the warnings and the fallbacks to a compare.
	Log zerolog.Logger
}

// Deps are the ports a Prover looks at the broker through, all required
// (engine/review's New refuses an engine without them). A DLQ the Watches
// cannot watch (Config.Unsupported) and counters that fail or lapse leave
// nothing to prove by: the approval compares.
type Deps struct {
	Clock    Clock
	Broker   Broker
	Counters CounterReader
	Watches  Watches
}

// Clock tells the time and waits (the engine's Clock).
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Broker looks at a queue by a passive declare (exact and current).
type Broker interface {
	// Inspect reports whether a queue exists, its ready count and its
	// consumers; a missing queue is Queue{Exists: false} and a nil error.
	Inspect(ctx context.Context, queue string) (Queue, error)
}

// Queue is what a passive declare tells of a queue.
type Queue struct {
	Name      string
	Exists    bool
	Ready     int
	Consumers int
}

// CounterReader reads the management API's counters of a queue.
type CounterReader interface {
	Counters(ctx context.Context, queue string) (Counters, error)
}

// Counters is the part of a management sample of a queue that the proof
// compares.
type Counters struct {
	Ready     int
	Unacked   int
	Consumers int
	Ack       int64
	// SampledAt is when the broker took the sample (zero when unknown):
	// the counters are at least as new as that.
	SampledAt time.Time
	// Lapsed is true when the counters mean nothing: the answer left them
	// out, or showed less than an earlier one for the queue, and the
	// broker has not sampled the queue since to confirm it.
	Lapsed bool
}

// Watches count exactly what reaches a DLQ between its preview and its
// approval (watch.go); engine/amqp implements the engine's port.
type Watches = engine.Watches

// WatchLook is one look at a DLQ and its watch.
type WatchLook = engine.WatchLook

// Read is what the preview's read saw of the DLQ.
type Read struct {
	// Whole is whether it saw every message, with no other client
	// holding any.
	Whole bool
	// Ready is the DLQ's ready count when the read began.
	Ready int
	// Duration is how long the read took.
	Duration time.Duration
}

// Preview is what an approval proves against: the previewed DLQ, when the
// preview was made, and what it froze for the proof.
type Preview struct {
	DLQ       string
	CreatedAt time.Time
	Proof     *Proof
}
