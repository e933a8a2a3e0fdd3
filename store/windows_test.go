package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// TestWindows: takes fit while their sum stays within the limit, a take
// that would exceed it is refused with when the oldest leaves, a given
// back take no longer counts, and takes older than the window drop out.
func TestWindows(t *testing.T) {
	t.Parallel()
	checkWindowTakes(t, newEnv(t))
	signed, refused := signedEnv(t)
	checkWindowTakes(t, signed)
	if len(*refused) != 0 {
		t.Fatalf("sealed windows refused: %v", (*refused)[0])
	}
}

// checkWindowTakes runs TestWindows against one store.
func checkWindowTakes(t *testing.T, e *testEnv) {
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

// refusedWindow checks that a take from window name is refused as
// changed in Redis.
func refusedWindow(t *testing.T, e *testEnv, name, what string) {
	t.Helper()
	got, err := e.st.Windows().Take(e.ctx, name, 1, 100, time.Hour)
	var se *SignatureError
	if !errors.Is(err, engine.ErrBadSignature) || !errors.As(err, &se) || se.Kind != "window" || se.ID != name {
		t.Fatalf("%s: the take reads %+v, %v; want it refused (kind window)", what, got, err)
	}
}

// TestWindowTamperRefused: with a signing key, a self-approval window
// whose take was deleted, lowered, or whose seal was deleted beside its
// takes, or which was written back as it was before a take, refuses the
// next take (a SignatureError) instead of counting less; a take given
// back by Give counts nothing and is not a change.
func TestWindowTamperRefused(t *testing.T) {
	t.Parallel()
	e, _ := signedEnv(t)
	w := e.st.Windows()
	key := func(name string) string { return e.st.b.k.window(name) }
	takes := func(name string, n int) (string, []redis.Z) {
		t.Helper()
		a, err := w.Take(e.ctx, name, n, 100, time.Hour)
		if err != nil || !a.OK {
			t.Fatalf("take: %+v %v", a, err)
		}
		e.clock.Advance(time.Minute)
		return a.ID, e.rdb.ZRangeWithScores(e.ctx, key(name), 0, -1).Val()
	}

	id, _ := takes("self:U1:/a.dlq", 60)
	e.rdb.ZRem(e.ctx, key("self:U1:/a.dlq"), id)
	refusedWindow(t, e, "self:U1:/a.dlq", "a take deleted")

	id, zs := takes("self:U1:/b.dlq", 60)
	lowered := strings.TrimSuffix(id, ":60") + ":1"
	e.rdb.ZRem(e.ctx, key("self:U1:/b.dlq"), id)
	e.rdb.ZAdd(e.ctx, key("self:U1:/b.dlq"), redis.Z{Score: zs[0].Score, Member: lowered})
	refusedWindow(t, e, "self:U1:/b.dlq", "a take lowered")

	takes("self:U1:/c.dlq", 60)
	e.rdb.ZRemRangeByScore(e.ctx, key("self:U1:/c.dlq"), "+inf", "+inf")
	refusedWindow(t, e, "self:U1:/c.dlq", "the seal deleted")

	_, before := takes("self:U1:/d.dlq", 30)
	takes("self:U1:/d.dlq", 30)
	e.rdb.Del(e.ctx, key("self:U1:/d.dlq"))
	e.rdb.ZAdd(e.ctx, key("self:U1:/d.dlq"), before...)
	refusedWindow(t, e, "self:U1:/d.dlq", "the window written back as before its last take")

	id, _ = takes("self:U1:/e.dlq", 60)
	if err := w.Give(e.ctx, "self:U1:/e.dlq", id); err != nil {
		t.Fatal(err)
	}
	if a, err := w.Take(e.ctx, "self:U1:/e.dlq", 100, 100, time.Hour); err != nil || !a.OK || a.Used != 0 {
		t.Fatalf("after a give: %+v %v, want the whole limit", a, err)
	}
}
