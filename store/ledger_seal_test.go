package store

import (
	"encoding/json"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// sealedLedger writes three signed windows for rid (copies ma-1, ma-2 of
// <rid>a, <rid>b; mb-1, mb-2 of <rid>c, <rid>d; mc-1 of <rid>e), confirms
// ma-1, and returns a function that writes the ledger and its acks back
// as they are now.
func sealedLedger(t *testing.T, e *testEnv, rid string) (restore func()) {
	t.Helper()
	l := e.st.Ledger()
	w := lease(t, e, rid)
	for _, win := range []engine.Window{windowOf(w, "ma", rid+"a", rid+"b"), windowOf(w, "mb", rid+"c", rid+"d"), windowOf(w, "mc", rid+"e")} {
		if refused, err := l.IntendWindow(e.ctx, win); err != nil || len(refused) != 0 {
			t.Fatalf("window: %v %v", refused, err)
		}
	}
	if err := l.Confirm(e.ctx, []engine.LedgerEntry{copyOf(entry(rid, rid+"a", 1), "ma-1")}); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Entries(e.ctx, rid); err != nil || len(got) != 5 {
		t.Fatalf("the sealed ledger reads %+v, %v; want 5 entries", got, err)
	}
	lk, ak := e.st.b.k.ledger(rid), e.st.b.k.acks(rid)
	recs := e.rdb.LRange(e.ctx, lk, 0, -1).Val()
	acks := e.rdb.HGetAll(e.ctx, ak).Val()
	return func() {
		t.Helper()
		e.rdb.Del(e.ctx, lk, ak)
		for _, r := range recs {
			e.rdb.RPush(e.ctx, lk, r)
		}
		for f, v := range acks {
			e.rdb.HSet(e.ctx, ak, f, v)
		}
		if _, err := l.Entries(e.ctx, rid); err != nil {
			t.Fatalf("the ledger written back as it was: %v", err)
		}
	}
}

// TestLedgerDeletedRecordRefused: a window's record deleted from the
// ledger (first, middle or last), an entry deleted from a record (alone,
// or with another entry of the ledger copied in its place), the whole
// ledger deleted, or its tally deleted, makes the ledger unreadable
// (SignatureError, kind ledger): a run never takes those copies as never
// sent.
func TestLedgerDeletedRecordRefused(t *testing.T) {
	t.Parallel()
	e, refused := signedEnv(t)
	const rid = "r_del"
	restore := sealedLedger(t, e, rid)
	lk, ak := e.st.b.k.ledger(rid), e.st.b.k.acks(rid)
	recs := e.rdb.LRange(e.ctx, lk, 0, -1).Val()
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	for i, what := range []string{"the first record deleted", "the middle record deleted", "the last record deleted"} {
		e.rdb.LRem(e.ctx, lk, 1, recs[i])
		refusedLedger(t, e, refused, rid, what)
		restore()
	}

	var rec logRec
	if err := json.Unmarshal([]byte(recs[1]), &rec); err != nil {
		t.Fatal(err)
	}
	one := rec
	one.Entries = rec.Entries[:1]
	b, _ := json.Marshal(one)
	e.rdb.LSet(e.ctx, lk, 1, string(b))
	refusedLedger(t, e, refused, rid, "an entry deleted from a record")
	restore()
	twice := rec
	twice.Entries = []logEntry{rec.Entries[0], rec.Entries[0]}
	b, _ = json.Marshal(twice)
	e.rdb.LSet(e.ctx, lk, 1, string(b))
	refusedLedger(t, e, refused, rid, "an entry replaced by a copy of another")
	restore()

	e.rdb.Del(e.ctx, lk)
	refusedLedger(t, e, refused, rid, "the whole ledger deleted")
	restore()
	e.rdb.Del(e.ctx, ak)
	refusedLedger(t, e, refused, rid, "the acks and the tally deleted")
	restore()
	e.rdb.HDel(e.ctx, ak, fieldTally)
	refusedLedger(t, e, refused, rid, "the tally deleted")
	restore()
}

// TestLedgerTallyRolledBack: the last record deleted together with the
// tally written back as it was before that record is refused by a store
// that has read the later tally, and a resumed run's writes go on where
// the ledger ends.
func TestLedgerTallyRolledBack(t *testing.T) {
	t.Parallel()
	e, refused := signedEnv(t)
	const rid = "r_rb"
	l := e.st.Ledger()
	w := lease(t, e, rid)
	if _, err := l.IntendWindow(e.ctx, windowOf(w, "ma", "a")); err != nil {
		t.Fatal(err)
	}
	ak := e.st.b.k.acks(rid)
	old := e.rdb.HGet(e.ctx, ak, fieldTally).Val()
	if _, err := l.IntendWindow(e.ctx, windowOf(w, "mb", "b")); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Entries(e.ctx, rid); err != nil || len(got) != 2 {
		t.Fatalf("reads %+v, %v", got, err)
	}
	e.rdb.RPop(e.ctx, e.st.b.k.ledger(rid))
	e.rdb.HSet(e.ctx, ak, fieldTally, old)
	refusedLedger(t, e, refused, rid, "the last record and the tally rolled back")

	// Another store (a process that never read the later tally) writes on
	// where the ledger ends, and reads it.
	other, err := New(e.st.b.cfg, e.rdb, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Ledger().IntendWindow(e.ctx, windowOf(w, "mc", "c")); err != nil {
		t.Fatal(err)
	}
	if got, err := other.Ledger().Entries(e.ctx, rid); err != nil || len(got) != 2 || got[1].ID != "c" {
		t.Fatalf("after a write from another position: %+v, %v", got, err)
	}
}
