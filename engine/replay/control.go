package replay

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// control watches the state operators desire for a running replay (pause,
// cancel) and answers, cheaply and at once, whether sending may continue.
// It re-reads the desired state every poll interval (default 200 ms), so a
// pause or cancel takes effect well within a second.
type control struct {
	replays engine.Replays
	id      string
	every   time.Duration
	clock   engine.Clock
	// warn logs a failed read; the last state read stays in force.
	warn    func(op string, err error)
	desired atomic.Value // State
	by      atomic.Value // string: who asked for it
}

func (c *control) load() engine.State {
	s, _ := c.desired.Load().(engine.State)
	return s
}

// refresh reads the desired state once.
func (c *control) refresh(ctx context.Context) {
	s, by, err := c.replays.Desired(ctx, c.id)
	if err != nil {
		if ctx.Err() == nil {
			c.warn("read desired state", err)
		}
		return
	}
	c.desired.Store(s)
	c.by.Store(by)
}

// watch refreshes until ctx ends.
func (c *control) watch(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.clock.After(c.every):
			c.refresh(ctx)
		}
	}
}

// actor is who asked for the desired state ("" when unknown).
func (c *control) actor() string {
	by, _ := c.by.Load().(string)
	return by
}

// err returns ErrPauseRequested or ErrCancelRequested when an operator
// asked for it, else nil.
func (c *control) err() error {
	switch c.load() {
	case engine.StatePaused:
		return engine.ErrPauseRequested
	case engine.StateCancelled:
		return engine.ErrCancelRequested
	}
	return nil
}
