package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// signedLedger writes a signed window of two copies (m-1 of <rid>x, m-2
// of <rid>y) for rid and confirms m-1.
func signedLedger(t *testing.T, e *testEnv, rid string) {
	t.Helper()
	l := e.st.Ledger()
	if _, err := l.IntendWindow(e.ctx, windowOf(lease(t, e, rid), "m", rid+"x", rid+"y")); err != nil {
		t.Fatal(err)
	}
	if err := l.Confirm(e.ctx, []engine.LedgerEntry{copyOf(entry(rid, rid+"x", 1), "m-1")}); err != nil {
		t.Fatal(err)
	}
	got, err := l.Entries(e.ctx, rid)
	if err != nil || len(got) != 2 || got[0].Pending || !got[1].Pending {
		t.Fatalf("the signed ledger reads %+v, %v; want x confirmed, y pending", got, err)
	}
}

// refusedLedger checks that rid's ledger is refused as changed, and
// reported.
func refusedLedger(t *testing.T, e *testEnv, refused *[]*SignatureError, rid, what string) {
	t.Helper()
	n := len(*refused)
	got, err := e.st.Ledger().Entries(e.ctx, rid)
	var se *SignatureError
	if !errors.Is(err, engine.ErrBadSignature) || !errors.As(err, &se) || se.Kind != "ledger" || se.ID != rid {
		t.Fatalf("%s: the ledger reads %+v, %v; want it refused (kind ledger)", what, got, err)
	}
	if len(*refused) != n+1 {
		t.Fatalf("%s: %d refusals reported, want 1", what, len(*refused)-n)
	}
}

// TestLedgerForgedConfirmRefused: a confirm written into the acks hash
// without the key (which would let a run ack y's original without a
// copy) makes the ledger unreadable, never y confirmed.
func TestLedgerForgedConfirmRefused(t *testing.T) {
	t.Parallel()
	e, refused := signedEnv(t)
	signedLedger(t, e, "r_fc")
	field := ackField("m", 2)
	key := e.st.b.k.acks("r_fc")
	cur := e.rdb.HGet(e.ctx, key, field).Val()
	if !strings.Contains(cur, "#") {
		t.Fatalf("the acks field %q carries no MAC", cur)
	}
	e.rdb.HSet(e.ctx, key, field, cur+"c1700000000000:2-2;")
	refusedLedger(t, e, refused, "r_fc", "an unsigned confirm")
	// The signed segment of m-1 widened to m-2, its MAC kept.
	e.rdb.HSet(e.ctx, key, field, strings.Replace(cur, ":1-1#", ":1-2#", 1))
	refusedLedger(t, e, refused, "r_fc", "a confirm's range widened")
	e.rdb.HSet(e.ctx, key, field, cur)
	if _, err := e.st.Ledger().Entries(e.ctx, "r_fc"); err != nil {
		t.Fatalf("the ledger restored: %v", err)
	}
	// r_fc's signed confirms copied into another replay's acks.
	signedLedger(t, e, "r_fc2")
	e.rdb.HSet(e.ctx, e.st.b.k.acks("r_fc2"), field, cur)
	refusedLedger(t, e, refused, "r_fc2", "another replay's confirms")
}

// TestLedgerForgedEntryRefused: an intent added, edited, moved from
// another replay or turned into a confirm is refused.
func TestLedgerForgedEntryRefused(t *testing.T) {
	t.Parallel()
	e, refused := signedEnv(t)
	signedLedger(t, e, "r_fe")
	key := e.st.b.k.ledger("r_fe")
	rec := e.rdb.LIndex(e.ctx, key, 0).Val()
	// Another message id under x's MAC.
	e.rdb.LSet(e.ctx, key, 0, strings.Replace(rec, `"i":"`, `"i":"z`, 1))
	refusedLedger(t, e, refused, "r_fe", "an entry's id changed")
	e.rdb.LSet(e.ctx, key, 0, rec)
	// An unsigned intent appended.
	e.rdb.RPush(e.ctx, key, `{"k":"i","a":1700000000000,"q":"orders.dlq","e":[{"i":"w","t":"orders","s":1,"c":"m-9"}]}`)
	refusedLedger(t, e, refused, "r_fe", "an unsigned entry added")
	e.rdb.RPop(e.ctx, key)
	// The record, signed, as a confirm (the layout says mixed, as a
	// confirm record makes it).
	e.rdb.HSet(e.ctx, e.st.b.k.acks("r_fe"), fieldLayout, layoutMixed)
	e.rdb.RPush(e.ctx, key, strings.Replace(rec, `"k":"i"`, `"k":"c"`, 1))
	refusedLedger(t, e, refused, "r_fe", "an intent turned into a confirm")
	e.rdb.RPop(e.ctx, key)
	// A confirm record in the window layout.
	e.rdb.HSet(e.ctx, e.st.b.k.acks("r_fe"), fieldLayout, layoutWindows)
	e.rdb.RPush(e.ctx, key, strings.Replace(rec, `"k":"i"`, `"k":"c"`, 1))
	refusedLedger(t, e, refused, "r_fe", "a confirm record in the window layout")
	e.rdb.RPop(e.ctx, key)
	// r_fe's signed record in another replay's ledger.
	signedLedger(t, e, "r_fe2")
	e.rdb.RPush(e.ctx, e.st.b.k.ledger("r_fe2"), rec)
	refusedLedger(t, e, refused, "r_fe2", "another replay's entries")
	if _, err := e.st.Ledger().Entries(e.ctx, "r_fe"); err != nil {
		t.Fatalf("the ledger restored: %v", err)
	}
}

// TestLedgerUnsignedEntries: a ledger written without a key is refused by
// a store with one, unless it accepts unsigned records; a signed one is
// refused by a store without a key.
func TestLedgerUnsignedEntries(t *testing.T) {
	t.Parallel()
	e, refused := signedEnv(t)
	plain, err := New(Config{Prefix: e.st.b.cfg.Prefix}, e.rdb, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	pe := *e
	pe.st = plain
	signedLedger(t, &pe, "r_old")
	refusedLedger(t, e, refused, "r_old", "an unsigned ledger")
	lenient, err := New(Config{Prefix: e.st.b.cfg.Prefix, SigningKey: testKey, AcceptUnsigned: true}, e.rdb, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := lenient.Ledger().Entries(e.ctx, "r_old"); err != nil || len(got) != 2 {
		t.Fatalf("with unsigned records accepted: %+v, %v", got, err)
	}
	signedLedger(t, e, "r_new")
	if _, err := plain.Ledger().Entries(e.ctx, "r_new"); !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("a signed ledger read without a key: %v, want refused", err)
	}
}

// BenchmarkLedgerEntryMAC is what signing costs a ledger entry: its MAC
// when a window is written, and the check when a page is read.
//
//	go test ./store -run '^$' -bench BenchmarkLedgerEntryMAC
func BenchmarkLedgerEntryMAC(b *testing.B) {
	st, err := New(Config{SigningKey: testKey}, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), nil) // never called
	if err != nil {
		b.Fatal(err)
	}
	le := logEntry{ID: "0b6f3c1e-8f4d-4a5e-9a51-4c2d7e1f0a93", Target: "orders", Seq: 41, Copy: "k7f2a9-123456"}
	b.Run("sign", func(b *testing.B) {
		b.ReportAllocs()
		m := st.b.ledgerMACer()
		for i := 0; i < b.N; i++ {
			le.MAC = m.entry("r_0123456789abcdef", "i", 1700000000000, "orders.dlq", le)
		}
	})
	rec := logRec{Kind: "i", At: 1700000000000, DLQ: "orders.dlq", Entries: make([]logEntry, 250)}
	for i := range rec.Entries {
		rec.Entries[i] = le
	}
	st.b.signEntries("r_0123456789abcdef", rec.Kind, rec.At, rec.DLQ, rec.Entries)
	b.Run("check", func(b *testing.B) {
		b.ReportAllocs()
		c := st.b.checkLedger("r_0123456789abcdef")
		for i := 0; i < b.N; i += len(rec.Entries) {
			if err := c.entries(&rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
