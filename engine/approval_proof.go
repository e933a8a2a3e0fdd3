package engine

import (
	"context"
	"time"
)

// ApprovalProof is what a preview freezes for its approval's proof that
// no previewed message left the DLQ (package engine/proof begins it at the
// preview and proves by it at the approval); every token carries it.
type ApprovalProof struct {
	// Ready is the DLQ's ready count when the preview's read began (a
	// passive declare: exact).
	Ready int `json:"ready"`
	// Ack is the DLQ's management ack counter in a sample from before the
	// read (the read acks nothing).
	Ack int64 `json:"ack"`
	// SampledAt is when the broker took that sample (zero when there was
	// none: only the watch can prove then).
	SampledAt time.Time `json:"sampled_at"`
	// Read is how long the preview's read took (0 in tokens from before
	// it was kept): about what a compare costs, so the most worth waiting
	// for the statistics instead.
	Read time.Duration `json:"read_ns,omitempty"`
	// Watch is the queue that counts what reached the DLQ after the
	// preview (engine/proof/watch.go), "" when none was opened; WatchArrived
	// and WatchReady are the watch's count and the DLQ's ready count
	// right after it was opened.
	Watch        string `json:"watch,omitempty"`
	WatchArrived int    `json:"watch_arrived,omitempty"`
	WatchReady   int    `json:"watch_ready,omitempty"`
}

// Watches count exactly what reaches a DLQ between its preview and its
// approval (engine/proof/watch.go): a watch is a queue bound as the DLQ is and read by
// no one, so every dead letter routed to the DLQ after it was opened is in
// it too.
type Watches interface {
	// OpenWatch opens a new watch of dlq, kept by the broker for ttl
	// unused, and looks at it and dlq (the watch first). It is
	// ErrUnsupported when dead letters can reach dlq other than
	// through its bindings (the default exchange).
	OpenWatch(ctx context.Context, dlq string, ttl time.Duration) (WatchLook, error)
	// LookWatch looks at dlq and then its watch; a watch that is gone is
	// an error (ErrQueueNotFound).
	LookWatch(ctx context.Context, dlq, watch string) (WatchLook, error)
	// CloseWatch deletes the watch; one already gone is not an error.
	CloseWatch(ctx context.Context, watch string) error
}

// WatchLook is one look at a DLQ and its watch, each by a passive declare
// (exact, not sampled).
type WatchLook struct {
	// Watch is the watch queue's name.
	Watch string
	// Arrived is how many messages the watch holds: every dead letter
	// routed to the DLQ since it was opened.
	Arrived int
	// Full says the watch reached its length limit and dropped its
	// oldest: Arrived is then short.
	Full bool
	// Ready is the DLQ's ready count.
	Ready int
	// Consumers counts the consumers of the DLQ and of the watch.
	Consumers int
}
