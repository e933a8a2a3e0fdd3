package store

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// TestLedgerPages100k: a replay of 100,000 copies in windows of 250,
// confirmed in batches of 200 that straddle the windows, with a copy in a
// thousand abandoned and one left pending, reads back exactly, in send
// order, a bounded page at a time and two round trips a page.
func TestLedgerPages100k(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := e.st.Ledger()
	w := lease(t, e, "r_big")
	const n, window, batch = 100_000, 250, 200
	all := make([]engine.LedgerEntry, n)
	for i := range all {
		all[i] = copyOf(entry("r_big", fmt.Sprintf("msg-%06d", i), i), fmt.Sprintf("rd-%d", i+1))
	}
	for start := 0; start < n; start += window {
		w.Entries = all[start : start+window]
		if refused, err := l.IntendWindow(e.ctx, w); err != nil || len(refused) != 0 {
			t.Fatal(refused, err)
		}
	}
	confirmedAt := map[int]time.Time{}
	for start := 0; start < n; start += batch {
		e.clock.Advance(time.Millisecond)
		var ok, gone []engine.LedgerEntry
		for i := start; i < start+batch; i++ {
			switch i % 1000 {
			case 500:
				gone = append(gone, all[i])
			case 999:
			default:
				c := all[i]
				c.At = e.clock.Now()
				confirmedAt[i] = c.At
				ok = append(ok, c)
			}
		}
		if err := l.Confirm(e.ctx, ok); err != nil {
			t.Fatal(err)
		}
		if err := l.Abandon(e.ctx, gone); err != nil {
			t.Fatal(err)
		}
	}
	hook := &countHook{}
	e.rdb.AddHook(hook)
	var got []engine.LedgerEntry
	pages := 0
	for from := int64(0); from >= 0; pages++ {
		before := hook.cmds.Load() + hook.pipes.Load()
		page, next, err := l.EntriesPage(e.ctx, "r_big", from)
		if err != nil {
			t.Fatal(err)
		}
		if trips := hook.cmds.Load() + hook.pipes.Load() - before; trips > 2 {
			t.Errorf("page at %d took %d round trips", from, trips)
		}
		if len(page) > pageRecords*window {
			t.Fatalf("page at %d holds %d entries", from, len(page))
		}
		got = append(got, page...)
		from = next
	}
	t.Logf("%d entries in %d pages", len(got), pages)
	i := 0
	for k := range n {
		if k%1000 == 500 {
			continue // abandoned: left out
		}
		if i >= len(got) {
			t.Fatalf("%d entries, want %d", len(got), n-n/1000)
		}
		g := got[i]
		i++
		if g.ID != all[k].ID || g.Copy != all[k].Copy || g.Seq != k || g.Pending != (k%1000 == 999) {
			t.Fatalf("entry %d: %+v, want %s pending %v", i-1, g, all[k].ID, k%1000 == 999)
		}
		if !g.Pending && !g.At.Equal(confirmedAt[k]) {
			t.Fatalf("entry %s confirmed at %v, want %v", g.ID, g.At, confirmedAt[k])
		}
	}
	if i != len(got) {
		t.Fatalf("%d entries, want %d", len(got), i)
	}
}

// TestLedgerOldLayout: a ledger written by the previous release (confirm
// and abandon records in the log, the DLQ's index written at confirm) is
// read exactly, goes on in the new layout after an upgrade (a copy in
// doubt confirmed by its tag, new windows), and its sends still refuse
// another replay's windows.
func TestLedgerOldLayout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := e.st.Ledger()
	other := lease(t, e, "r_other") // previewed before r_old sent
	e.clock.Advance(time.Second)
	t0 := e.clock.Now()
	oldRec := func(kind string, es ...logEntry) string {
		b, err := json.Marshal(logRec{Kind: kind, At: t0.UnixMilli(), DLQ: "orders.dlq", Entries: es})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	a, b, c, d := logEntry{ID: "a", Target: "orders", Seq: 1, Copy: "old-1"}, logEntry{ID: "b", Target: "orders", Seq: 2, Copy: "old-2"},
		logEntry{ID: "c", Target: "orders", Seq: 3, Copy: "old-3"}, logEntry{ID: "d", Target: "orders", Seq: 4, Copy: "old-4"}
	g := logEntry{ID: "g", Target: "orders", Seq: 5} // written before copies were tagged
	key := e.st.b.k.ledger("r_old")
	if err := e.rdb.RPush(e.ctx, key, oldRec("i", a, b, c, d, g), oldRec("c", b, a), oldRec("a", d)).Err(); err != nil {
		t.Fatal(err)
	}
	// The previous release wrote the index at confirm.
	if err := prevIndexScript.Run(e.ctx, e.rdb, []string{e.st.b.k.sent("orders.dlq")}, 0, "r_old", t0.UnixMilli(), "a", 1, "b", 1).Err(); err != nil {
		t.Fatal(err)
	}
	check := func(when string, want ...string) {
		t.Helper()
		got, err := l.Entries(e.ctx, "r_old")
		if err != nil {
			t.Fatal(err)
		}
		var words []string
		for _, g := range got {
			s := g.ID
			if g.Pending {
				s += "?"
			}
			words = append(words, s)
		}
		if fmt.Sprint(words) != fmt.Sprint(want) {
			t.Errorf("%s: entries %v, want %v", when, words, want)
		}
	}
	check("the old layout", "a", "b", "c?", "g?")

	// After the upgrade: a resumed run resends c (confirmed by its copy
	// tag) and g (by id, target and seq: it has no tag), and sends e and
	// f in a window; f stays pending.
	w := lease(t, e, "r_old")
	e.clock.Advance(time.Second)
	if err := l.Confirm(e.ctx, []engine.LedgerEntry{{ReplayID: "r_old", DLQ: "orders.dlq", ID: "c", Target: "orders", Seq: 3, Copy: "old-3"},
		{ReplayID: "r_old", DLQ: "orders.dlq", ID: "g", Target: "orders", Seq: 5}}); err != nil {
		t.Fatal(err)
	}
	if refused, err := l.IntendWindow(e.ctx, windowOf(w, "new", "e", "f")); err != nil || len(refused) != 0 {
		t.Fatal(refused, err)
	}
	if err := l.Confirm(e.ctx, []engine.LedgerEntry{copyOf(entry("r_old", "e", 1), "new-1")}); err != nil {
		t.Fatal(err)
	}
	check("after the upgrade", "a", "b", "c", "g", "e", "f?")
	if v, _ := e.rdb.HGet(e.ctx, e.st.b.k.acks("r_old"), fieldLayout).Result(); v != layoutMixed {
		t.Errorf("layout %q, want %q", v, layoutMixed)
	}
	// The other replay's preview came before both: a (old index) and e
	// (a window's mark) refuse; d was abandoned, never sent.
	refused, err := l.IntendWindow(e.ctx, windowOf(other, "mo", "a", "d", "e"))
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) != 2 || refused["a"] != "r_old" || refused["e"] != "r_old" {
		t.Errorf("refused %v, want a and e by r_old", refused)
	}
}
