package store

import (
	"testing"
	"time"
)

// TestWindows: takes fit while their sum stays within the limit, a take
// that would exceed it is refused with when the oldest leaves, a given
// back take no longer counts, and takes older than the window drop out.
func TestWindows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.st.Windows()
	const win = time.Hour
	a, err := w.Take(e.ctx, "self:U1:/orders.dlq", 60, 100, win)
	if err != nil || !a.OK || a.Used != 0 {
		t.Fatalf("first take: %+v, %v", a, err)
	}
	e.clock.Advance(10 * time.Minute)
	b, err := w.Take(e.ctx, "self:U1:/orders.dlq", 50, 100, win)
	if err != nil || b.OK || b.Used != 60 || b.RetryAfter != 50*time.Minute {
		t.Fatalf("over the limit: %+v, %v (want refused, used 60, retry in 50m)", b, err)
	}
	if c, err := w.Take(e.ctx, "self:U2:/orders.dlq", 50, 100, win); err != nil || !c.OK {
		t.Fatalf("another requester shares the window: %+v, %v", c, err)
	}
	if c, err := w.Take(e.ctx, "self:U1:/orders.dlq", 40, 100, win); err != nil || !c.OK || c.Used != 60 {
		t.Fatalf("a take that fits: %+v, %v", c, err)
	} else if err := w.Give(e.ctx, "self:U1:/orders.dlq", c.ID); err != nil {
		t.Fatal(err)
	}
	if c, err := w.Take(e.ctx, "self:U1:/orders.dlq", 40, 100, win); err != nil || !c.OK || c.Used != 60 {
		t.Fatalf("after giving back: %+v, %v (want used 60)", c, err)
	}
	e.clock.Advance(51 * time.Minute) // the first take (60) leaves the window
	if c, err := w.Take(e.ctx, "self:U1:/orders.dlq", 60, 100, win); err != nil || !c.OK || c.Used != 40 {
		t.Fatalf("after the window: %+v, %v (want used 40)", c, err)
	}
	if _, err := w.Take(e.ctx, "x", 1, 1, 0); err == nil {
		t.Fatal("a zero window was accepted")
	}
}
