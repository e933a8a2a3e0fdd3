package replay

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// heartbeat keeps a replay's lease alive while its owner runs it. When an
// extension fails because the lease is gone, it cancels the run: an owner
// that lost its lease must stop sending before its next batch.
type heartbeat struct {
	leases engine.Leases
	id     string
	owner  string
	ttl    time.Duration
	clock  engine.Clock
	// warn logs a failed extension that is retried (run.warn).
	warn func(op string, err error)
	lost atomic.Bool
	// yielded is set once the run released the lease itself (its last
	// write): the heartbeat then stops without reporting a loss.
	yielded atomic.Bool
}

// run extends the lease every ttl/3 until ctx ends; cancel is called once
// the lease is lost.
func (h *heartbeat) run(ctx context.Context, cancel context.CancelFunc) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.clock.After(h.ttl / 3):
		}
		if h.yielded.Load() {
			return
		}
		err := h.leases.Extend(ctx, h.id, h.owner, h.ttl)
		if errors.Is(err, engine.ErrLeaseLost) {
			h.lost.Store(true)
			cancel()
			return
		}
		// Other errors (Redis briefly unreachable) are retried on the next
		// tick; if the lease expires meanwhile, Extend reports it lost.
		if err != nil && ctx.Err() == nil {
			h.warn("extend lease", err)
		}
	}
}

// check verifies, synchronously, that the owner still holds the lease; it
// is the fence before every publish batch.
func (h *heartbeat) check(ctx context.Context) error {
	if h.lost.Load() {
		return engine.ErrLeaseLost
	}
	if err := h.leases.Extend(ctx, h.id, h.owner, h.ttl); err != nil {
		if errors.Is(err, engine.ErrLeaseLost) {
			h.lost.Store(true)
		}
		return err
	}
	return nil
}
