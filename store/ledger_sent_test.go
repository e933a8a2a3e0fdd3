package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// refusedIndex checks that History of orders.dlq is refused as changed
// in Redis.
func refusedIndex(t *testing.T, e *testEnv, what string) {
	t.Helper()
	got, err := e.st.Ledger().History(e.ctx, "orders.dlq", []string{"x", "y", "z", "w"})
	var se *SignatureError
	if !errors.Is(err, engine.ErrBadSignature) || !errors.As(err, &se) || se.Kind != "sent index" || se.ID != "orders.dlq" {
		t.Fatalf("%s: history reads %+v, %v; want it refused (kind sent index)", what, got, err)
	}
}

// TestSentIndexTamperRefused: with a signing key, a DLQ's sent index
// whose part was made older, moved to another id, stripped of its MAC,
// or whose member, whole key or floor was deleted, is refused by History
// (a SignatureError) instead of showing those messages as never
// replayed; an abandoned copy's id (withdrawn by dlqbot) is no change.
func TestSentIndexTamperRefused(t *testing.T) {
	t.Parallel()
	e, _ := signedEnv(t)
	l := e.st.Ledger()
	a := lease(t, e, "r_a")
	if _, err := l.IntendWindow(e.ctx, windowOf(a, "ma", "x", "y", "z")); err != nil {
		t.Fatal(err)
	}
	if err := l.Abandon(e.ctx, []engine.LedgerEntry{copyOf(entry("r_a", "z", 3), "ma-3")}); err != nil {
		t.Fatal(err)
	}
	h, err := l.History(e.ctx, "orders.dlq", []string{"x", "y", "z", "w"})
	if err != nil || len(h) != 2 || h["x"][0].ReplayID != "r_a" || len(h["z"]) != 0 {
		t.Fatalf("history: %+v %v; want x and y sent by r_a, z withdrawn", h, err)
	}
	ik, fk := e.st.b.k.sent("orders.dlq"), e.st.b.k.sentFloor("orders.dlq")
	index := e.rdb.HGetAll(e.ctx, ik).Val()
	floor := e.rdb.Get(e.ctx, fk).Val()
	x := index["x"]
	if strings.Count(x, ":") != 3 || floor == "" {
		t.Fatalf("x's part %q carries no MAC, or no floor (%q)", x, floor)
	}
	restore := func() {
		t.Helper()
		e.rdb.Del(e.ctx, ik, fk)
		for f, v := range index {
			e.rdb.HSet(e.ctx, ik, f, v)
		}
		e.rdb.Set(e.ctx, fk, floor, 0)
		if _, err := l.History(e.ctx, "orders.dlq", []string{"x", "y"}); err != nil {
			t.Fatalf("the index written back: %v", err)
		}
	}
	f := strings.Split(x, ":")

	e.rdb.HSet(e.ctx, ik, "x", f[0]+":1:"+f[2]+":"+f[3])
	refusedIndex(t, e, "a part made older")
	restore()
	e.rdb.HSet(e.ctx, ik, "x", index["y"])
	refusedIndex(t, e, "y's part moved to x")
	restore()
	e.rdb.HSet(e.ctx, ik, "x", strings.Join(f[:3], ":"))
	refusedIndex(t, e, "a part without its MAC")
	restore()
	e.rdb.HDel(e.ctx, ik, "x")
	refusedIndex(t, e, "a member deleted")
	restore()
	e.rdb.Del(e.ctx, ik)
	refusedIndex(t, e, "the whole index deleted")
	restore()
	e.rdb.Del(e.ctx, fk)
	refusedIndex(t, e, "the floor deleted")
	restore()
}
