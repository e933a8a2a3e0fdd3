package replay_test

import (
	"sync"
	"testing"
	"time"
)

// shiftClock is the wall clock moved forward by Advance: time goes on as
// usual, and a test skips a long wait of the engine (a grace period,
// HeldWait, a follow-up's delay) by advancing it. A wait (After) ends when
// the shifted time reaches its end, by the wall clock or by Advance.
type shiftClock struct {
	mu    sync.Mutex
	off   time.Duration
	waits map[*shiftWait]struct{}
}

// shiftWait is one pending After.
type shiftWait struct {
	end time.Time // in shifted time
	ch  chan time.Time
	t   *time.Timer
}

func (c *shiftClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now() }

func (c *shiftClock) now() time.Time { return time.Now().Add(c.off) }

func (c *shiftClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &shiftWait{end: c.now().Add(d), ch: make(chan time.Time, 1)}
	if c.waits == nil {
		c.waits = map[*shiftWait]struct{}{}
	}
	c.waits[w] = struct{}{}
	w.t = time.AfterFunc(d, func() { c.fire(w) })
	return w.ch
}

// fire ends w if it is still pending.
func (c *shiftClock) fire(w *shiftWait) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.waits[w]; ok {
		delete(c.waits, w)
		w.ch <- c.now()
	}
}

// Advance moves the clock forward by d: the waits that end by then end
// now, and the others are due sooner by the wall clock.
func (c *shiftClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
	now := c.now()
	for w := range c.waits {
		if left := w.end.Sub(now); left > 0 {
			w.t.Reset(left)
			continue
		}
		w.t.Stop()
		delete(c.waits, w)
		w.ch <- now
	}
}

func TestShiftClockWaitsEndByAdvanceOrWallClock(t *testing.T) {
	t.Parallel()
	c := &shiftClock{}
	long, short := c.After(time.Hour), c.After(10*time.Millisecond)
	select {
	case <-short: // by the wall clock
	case <-time.After(5 * time.Second):
		t.Fatal("a 10ms wait did not end by the wall clock")
	}
	select {
	case <-long:
		t.Fatal("an hour's wait ended before the clock was advanced")
	default:
	}
	before := c.Now()
	c.Advance(time.Hour)
	select {
	case at := <-long:
		if at.Sub(before) < time.Hour {
			t.Fatalf("the wait ended at %s, less than an hour after %s", at, before)
		}
	default:
		t.Fatal("an hour's wait did not end when the clock was advanced by an hour")
	}
	// A wait partly advanced ends by the wall clock for the rest.
	part := c.After(time.Hour + 20*time.Millisecond)
	c.Advance(time.Hour)
	select {
	case <-part:
	case <-time.After(5 * time.Second):
		t.Fatal("the rest of a partly advanced wait did not end by the wall clock")
	}
}
