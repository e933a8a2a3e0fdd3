package store

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// floorEnv is a signing store with replay r_1 of q.dlq begun and three
// of its copies (two groups) recorded back from a batch of 4 arrivals.
func floorEnv(t *testing.T) (*testEnv, *Returns, *[]*SignatureError) {
	t.Helper()
	e, refused := signedEnv(t)
	rs := e.st.Returns()
	if err := rs.Begin(e.ctx, "r_1", "q.dlq"); err != nil {
		t.Fatal(err)
	}
	recordReturns(t, e, rs, 0, 3)
	return e, rs, refused
}

// recordReturns records n returns of r_1 (ids from first on) in a batch of
// n+1 arrivals.
func recordReturns(t *testing.T, e *testEnv, rs *Returns, first, n int) {
	t.Helper()
	var batch []engine.ReturnEvent
	for i := first; i < first+n; i++ {
		g := "rejected"
		if i%2 == 1 {
			g = "Boom"
		}
		batch = append(batch, engine.ReturnEvent{ReplayID: "r_1", ID: "m" + string(rune('a'+i)), Group: g, Reason: "rejected", ReplayCount: 1, At: e.clock.Now()})
	}
	if err := rs.Record(e.ctx, "q.dlq", batch, n+1); err != nil {
		t.Fatal(err)
	}
}

// refusedAs asserts err is a refused record of kind and that it was
// reported.
func refusedAs(t *testing.T, err error, kind string, refused *[]*SignatureError, why string) {
	t.Helper()
	var se *SignatureError
	if !errors.Is(err, engine.ErrBadSignature) || !errors.As(err, &se) || se.Kind != kind {
		t.Fatalf("%s: got %v, want a refused %s record", why, err, kind)
	}
	for _, r := range *refused {
		if r.Kind == kind {
			return
		}
	}
	t.Fatalf("%s: refused but not reported (OnBadSignature): %v", why, *refused)
}

// TestReturnsFloorUntouchedReads: the floors never refuse a record dlqbot
// wrote alone, and cost the reader nothing it can see.
func TestReturnsFloorUntouchedReads(t *testing.T) {
	t.Parallel()
	e, rs, refused := floorEnv(t)
	recordReturns(t, e, rs, 3, 2)
	if err := rs.Begin(e.ctx, "r_1", "q.dlq"); err != nil { // a resume
		t.Fatal(err)
	}
	rec, err := rs.Returned(e.ctx, "r_1", 0)
	if err != nil || rec.Total != 5 || len(rec.Events) != 5 {
		t.Fatalf("record %+v, %v: want 5 returns", rec, err)
	}
	if n, err := rs.Arrived(e.ctx, "q.dlq"); err != nil || n != 7 {
		t.Fatalf("arrived %d, %v: want 7", n, err)
	}
	if len(*refused) != 0 {
		t.Fatalf("refused %v", *refused)
	}
}

// TestReturnsLoweredOrDeletedIsRefused: every way of hiding returns in
// Redis — the count lowered (consistently, groups too), the log or a
// field deleted, the whole record deleted — is refused and reported, and
// stays refused once later batches raise the count over the old floor.
func TestReturnsLoweredOrDeletedIsRefused(t *testing.T) {
	t.Parallel()
	for name, tamper := range map[string]func(e *testEnv){
		"count lowered": func(e *testEnv) {
			k := e.st.b.k.returns("r_1")
			e.rdb.HSet(e.ctx, k, "n", 1, "g:rejected", 1, "g:Boom", 0, "r:1", 1)
		},
		"log deleted":    func(e *testEnv) { e.rdb.Del(e.ctx, e.st.b.k.returnLog("r_1")) },
		"id deleted":     func(e *testEnv) { e.rdb.HDel(e.ctx, e.st.b.k.returns("r_1"), "i:ma") },
		"record deleted": func(e *testEnv) { e.rdb.Del(e.ctx, e.st.b.k.returns("r_1"), e.st.b.k.returnLog("r_1")) },
		"group lowered":  func(e *testEnv) { e.rdb.HSet(e.ctx, e.st.b.k.returns("r_1"), "g:rejected", 0) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, rs, refused := floorEnv(t)
			tamper(e)
			_, err := rs.Returned(e.ctx, "r_1", 0)
			refusedAs(t, err, "returns", refused, name)
			// Later batches raise the count over the floor again: the
			// batch's writer saw the count lowered and tainted the floor.
			recordReturns(t, e, rs, 3, 6)
			_, err = rs.Returned(e.ctx, "r_1", -1)
			refusedAs(t, err, "returns", refused, name+", after more batches")
			if err := rs.Begin(e.ctx, "r_1", "q.dlq"); !errors.Is(err, engine.ErrBadSignature) {
				t.Fatalf("%s: a resume's Begin: %v, want refused", name, err)
			}
		})
	}
}

// TestReturnsFloorForgedOrDeletedIsRefused: a floor edited (lowered with
// its count), deleted while its count stays, or written back from earlier
// with the count lowered to it, is refused and reported.
func TestReturnsFloorForgedOrDeletedIsRefused(t *testing.T) {
	t.Parallel()
	e, rs, refused := floorEnv(t)
	fk := e.st.b.k.returnFloor("r_1")
	raw, err := e.rdb.Get(e.ctx, fk).Result()
	if err != nil || !strings.HasPrefix(raw, "3 0 ") {
		t.Fatalf("floor %q, %v: want a floor of 3", raw, err)
	}
	e.rdb.Set(e.ctx, fk, "1"+raw[1:], 0)
	k := e.st.b.k.returns("r_1")
	e.rdb.HSet(e.ctx, k, "n", 1, "g:rejected", 1, "g:Boom", 0, "r:1", 1)
	_, err = rs.Returned(e.ctx, "r_1", -1)
	refusedAs(t, err, "returns", refused, "floor forged")

	e2, rs2, refused2 := floorEnv(t)
	e2.rdb.Del(e2.ctx, e2.st.b.k.returnFloor("r_1"))
	_, err = rs2.Returned(e2.ctx, "r_1", -1)
	refusedAs(t, err, "returns", refused2, "floor deleted")

	// Written back: the hash and floor after the first batch, saved and
	// restored after a second. The floor is genuine; this process
	// remembers the higher count.
	e3, rs3, refused3 := floorEnv(t)
	k3, fk3 := e3.st.b.k.returns("r_1"), e3.st.b.k.returnFloor("r_1")
	saved, _ := e3.rdb.Dump(e3.ctx, k3).Result()
	savedFloor, _ := e3.rdb.Get(e3.ctx, fk3).Result()
	recordReturns(t, e3, rs3, 3, 2)
	if _, err := rs3.Returned(e3.ctx, "r_1", -1); err != nil {
		t.Fatal(err)
	}
	e3.rdb.RestoreReplace(e3.ctx, k3, 0, saved)
	e3.rdb.Set(e3.ctx, fk3, savedFloor, 0)
	_, err = rs3.Returned(e3.ctx, "r_1", -1)
	refusedAs(t, err, "returns", refused3, "record and floor written back")
}

// TestTapArrivalsLoweredOrDeletedIsRefused: the DLQ's arrival count
// lowered or deleted, or its floor forged, is refused and reported; a
// count from before floors is refused by reads and taken at a replay's
// Begin (or with DLQBOT_ACCEPT_UNSIGNED).
func TestTapArrivalsLoweredOrDeletedIsRefused(t *testing.T) {
	t.Parallel()
	e, rs, refused := floorEnv(t)
	ak, fk := e.st.b.k.tapArrived("q.dlq"), e.st.b.k.tapFloor("q.dlq")
	e.rdb.Set(e.ctx, ak, 1, 0)
	_, err := rs.Arrived(e.ctx, "q.dlq")
	refusedAs(t, err, "tap arrivals", refused, "arrivals lowered")
	e.rdb.Del(e.ctx, ak)
	_, err = rs.Arrived(e.ctx, "q.dlq")
	refusedAs(t, err, "tap arrivals", refused, "arrivals deleted")

	e2, rs2, refused2 := floorEnv(t)
	raw, _ := e2.rdb.Get(e2.ctx, e2.st.b.k.tapFloor("q.dlq")).Result()
	e2.rdb.Set(e2.ctx, e2.st.b.k.tapFloor("q.dlq"), "9"+raw, 0)
	_, err = rs2.Arrived(e2.ctx, "q.dlq")
	refusedAs(t, err, "tap arrivals", refused2, "arrivals floor forged")

	// A count from before floors, in a fresh process.
	e.rdb.Del(e.ctx, fk)
	e.rdb.Set(e.ctx, e.st.b.k.tapArrived("other.dlq"), 5, 0)
	fresh, err := New(Config{Prefix: e.st.b.cfg.Prefix, SigningKey: testKey}, e.rdb, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.Returns().Arrived(e.ctx, "other.dlq"); !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("a count without a floor: %v, want refused", err)
	}
	if err := fresh.Returns().Begin(e.ctx, "r_9", "other.dlq"); err != nil {
		t.Fatal(err)
	}
	if n, err := fresh.Returns().Arrived(e.ctx, "other.dlq"); err != nil || n != 5 {
		t.Fatalf("after Begin: %d, %v: want 5", n, err)
	}
}

// TestReturnsFloorLagsWithoutFalseAlarms: writers racing on one replay
// and one DLQ (their floors written in any order) and a record expired
// with its retention are never refused.
func TestReturnsFloorLagsWithoutFalseAlarms(t *testing.T) {
	t.Parallel()
	e, refused := signedEnv(t)
	other, err := New(e.st.b.cfg, e.rdb, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.Returns().Begin(e.ctx, "r_1", "q.dlq"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w, st := range []*Store{e.st, other, e.st, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				ev := engine.ReturnEvent{ReplayID: "r_1", ID: string(rune('a'+w)) + string(rune('a'+i)), Group: "g", ReplayCount: 1}
				if err := st.Returns().Record(e.ctx, "q.dlq", []engine.ReturnEvent{ev}, 2); err != nil {
					t.Error(err)
				}
				if _, err := st.Returns().Returned(e.ctx, "r_1", -1); err != nil {
					t.Error(err)
				}
				if _, err := st.Returns().Arrived(e.ctx, "q.dlq"); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	rec, err := other.Returns().Returned(e.ctx, "r_1", -1)
	if err != nil || rec.Total != 100 {
		t.Fatalf("record %d, %v: want 100", rec.Total, err)
	}
	if len(*refused) != 0 {
		t.Fatalf("refused %v", (*refused)[0])
	}
	// Expired: the record's keys gone after the retention since the last
	// write, the floors (kept an hour longer) still there.
	e.rdb.Del(e.ctx, e.st.b.k.returns("r_1"), e.st.b.k.returnLog("r_1"), e.st.b.k.tapArrived("q.dlq"))
	e.clock.Advance(DefaultRetention + time.Minute)
	if rec, err := e.st.Returns().Returned(e.ctx, "r_1", -1); err != nil || rec.Tapped {
		t.Fatalf("expired record %+v, %v: want none", rec, err)
	}
	if n, err := e.st.Returns().Arrived(e.ctx, "q.dlq"); err != nil || n != 0 {
		t.Fatalf("expired arrivals %d, %v", n, err)
	}
}
