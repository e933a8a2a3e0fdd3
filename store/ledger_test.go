package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

func entry(rid, id string, seq int) engine.LedgerEntry {
	return engine.LedgerEntry{ReplayID: rid, DLQ: "orders.dlq", ID: id, Target: "orders", Seq: seq}
}

// copyOf is e with copy tag c.
func copyOf(e engine.LedgerEntry, c string) engine.LedgerEntry {
	e.Copy = c
	return e
}

// lease takes replay rid's lease for a run and returns a window of that
// run (no entries yet), its preview made at the clock's now.
func lease(t testing.TB, e *testEnv, rid string) engine.Window {
	t.Helper()
	owner := "worker-" + rid
	epoch, ok, err := e.st.Leases().Acquire(e.ctx, rid, owner, time.Minute)
	if err != nil || !ok {
		t.Fatalf("lease %s: %v %v", rid, ok, err)
	}
	return engine.Window{ReplayID: rid, DLQ: "orders.dlq", Owner: owner, Epoch: epoch, Since: e.clock.Now()}
}

func TestLedgerIntendConfirm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := e.st.Ledger()
	t0 := e.clock.Now()
	w := lease(t, e, "r_1")
	w.Entries = []engine.LedgerEntry{copyOf(entry("r_1", "a", 1), "m1-1"), copyOf(entry("r_1", "b", 2), "m1-2"),
		copyOf(entry("r_1", "a", 1), "m1-3"), copyOf(entry("r_1", "c", 3), "m1-4")}
	if refused, err := l.IntendWindow(e.ctx, w); err != nil || len(refused) != 0 {
		t.Fatal(refused, err)
	}
	e.clock.Advance(time.Second)
	// Confirm out of order, one copy of "a" only, and a send with no
	// intent (no copy tag: recorded as earlier releases did).
	if err := l.Confirm(e.ctx, []engine.LedgerEntry{copyOf(entry("r_1", "b", 2), "m1-2"), copyOf(entry("r_1", "a", 1), "m1-1"), entry("r_1", "d", 4)}); err != nil {
		t.Fatal(err)
	}
	got, err := l.Entries(e.ctx, "r_1")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		id      string
		pending bool
	}{{"a", false}, {"b", false}, {"a", true}, {"c", true}, {"d", false}}
	if len(got) != len(want) {
		t.Fatalf("entries: %+v", got)
	}
	for i, w := range want {
		if got[i].ID != w.id || got[i].Pending != w.pending || got[i].ReplayID != "r_1" || got[i].Target != "orders" {
			t.Errorf("entry %d: %+v, want id %s pending %v", i, got[i], w.id, w.pending)
		}
	}
	if !got[0].At.Equal(t0.Add(time.Second)) || !got[2].At.Equal(t0) {
		t.Errorf("times: confirmed %v, pending %v", got[0].At, got[2].At)
	}
	if none, err := l.Entries(e.ctx, "r_none"); err != nil || len(none) != 0 {
		t.Errorf("unknown replay: %v %v", none, err)
	}
	// The DLQ's index names r_1 from its intents on: a, b and c (c is
	// pending: maybe sent), and d from its confirm.
	hist, err := l.History(e.ctx, "orders.dlq", []string{"a", "b", "c", "d", "zz"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 4 || hist["a"][0].Count != 2 || hist["d"][0].ReplayID != "r_1" || hist["zz"] != nil {
		t.Errorf("history: %+v", hist)
	}
}

func TestLedgerHistoryNewestFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, rid := range []string{"r_old", "r_new"} {
		if err := e.st.Replays().Create(e.ctx, engine.Replay{ID: rid, Approver: "approver-of-" + rid}); err != nil {
			t.Fatal(err)
		}
	}
	l := e.st.Ledger()
	if err := l.Confirm(e.ctx, []engine.LedgerEntry{entry("r_old", "m", 1), entry("r_old", "m", 1)}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	if err := l.Confirm(e.ctx, []engine.LedgerEntry{entry("r_new", "m", 1), entry("r_gone", "m", 1)}); err != nil {
		t.Fatal(err)
	}
	hist, err := l.History(e.ctx, "orders.dlq", []string{"m", "m"})
	if err != nil {
		t.Fatal(err)
	}
	s := hist["m"]
	if len(s) != 3 || s[2].ReplayID != "r_old" || s[2].Count != 2 || s[2].Approver != "approver-of-r_old" ||
		s[0].Approver == s[1].Approver || !s[0].At.After(s[2].At) {
		t.Errorf("history: %+v", s)
	}
}

// countHook counts the round trips a client makes, except the handshake of
// new connections (HELLO, CLIENT SETINFO).
type countHook struct{ cmds, pipes atomic.Int64 }

func handshake(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "client", "auth", "select":
		return true
	}
	return false
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd) {
			h.cmds.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && !handshake(cmds[0]) {
			h.pipes.Add(1)
		}
		return next(ctx, cmds)
	}
}

func TestLedgerHistory100k(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hook := &countHook{}
	e.rdb.AddHook(hook)
	l := e.st.Ledger()
	const n = 100_000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("msg-%06d", i)
	}
	// The first confirm loads the scripts a Redis may not know yet.
	if err := l.Confirm(e.ctx, []engine.LedgerEntry{entry("r_warm", "warm", 0)}); err != nil {
		t.Fatal(err)
	}
	for start := 0; start < n; start += 1000 {
		batch := make([]engine.LedgerEntry, 0, 1000)
		for _, id := range ids[start : start+1000] {
			batch = append(batch, entry("r_big", id, start))
		}
		before := hook.cmds.Load() + hook.pipes.Load()
		if err := l.Confirm(e.ctx, batch); err != nil {
			t.Fatal(err)
		}
		if trips := hook.cmds.Load() + hook.pipes.Load() - before; trips != 1 {
			t.Fatalf("confirming 1,000 entries took %d round trips, want 1", trips)
		}
	}
	if err := l.Confirm(e.ctx, []engine.LedgerEntry{entry("r_second", ids[7], 7)}); err != nil {
		t.Fatal(err)
	}
	before := hook.cmds.Load() + hook.pipes.Load()
	hist, err := l.History(e.ctx, "orders.dlq", append(ids, "never-sent"))
	if err != nil {
		t.Fatal(err)
	}
	trips := hook.cmds.Load() + hook.pipes.Load() - before
	if trips > 4 {
		t.Errorf("History of %d ids took %d round trips", n, trips)
	}
	t.Logf("History of %d ids: %d round trips", n, trips)
	if len(hist) != n || len(hist[ids[7]]) != 2 || hist[ids[99_999]][0].Count != 1 {
		t.Fatalf("history: %d ids, %+v", len(hist), hist[ids[7]])
	}
	got, err := l.Entries(e.ctx, "r_big")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || got[0].ID != ids[0] || got[n-1].ID != ids[n-1] || got[n/2].ID != ids[n/2] {
		t.Errorf("entries: %d, out of order", len(got))
	}
}
