package store

import (
	"errors"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// TestSignedReplayRolledBackIsRefused: the signed record of a stopped
// replay, saved before a cancel was accepted and written back after it,
// is refused (ErrRecordRolledBack, a bad signature to every front end),
// and a resume is not recorded on top of it; the whole hash written back
// is refused by a process that read the newer version.
func TestSignedReplayRolledBackIsRefused(t *testing.T) {
	t.Parallel()
	e, refused := signedEnv(t)
	rs := e.st.Replays()
	id := "r_rollback01"
	if err := rs.Create(e.ctx, engine.Replay{ID: id, DLQ: "orders.dlq", State: engine.StateStopped, Requester: "U1", Approver: "U2", Total: 5}); err != nil {
		t.Fatal(err)
	}
	key := e.st.b.k.replay(id)
	saved, err := e.rdb.HGetAll(e.ctx, key).Result()
	if err != nil || saved[fieldData] == "" {
		t.Fatalf("saved copy: %v %v", saved, err)
	}
	if res, err := rs.DesireIf(e.ctx, id, engine.StateCancelled, "U3", engine.StateStopped); err != nil || !res.Recorded {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	if err := rs.Update(e.ctx, id, func(r *engine.Replay) error { r.State = engine.StateCancelled; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, err := rs.Get(e.ctx, id); err != nil || got.State != engine.StateCancelled {
		t.Fatalf("cancelled: %+v %v", got, err)
	}

	// The saved record written back over the cancelled one.
	if err := e.rdb.HSet(e.ctx, key, fieldData, saved[fieldData]).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Get(e.ctx, id); !errors.Is(err, ErrRecordRolledBack) || !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("Get of the written-back record: %v, want ErrRecordRolledBack", err)
	}
	res, err := rs.DesireIf(e.ctx, id, engine.StateRunning, "U4", engine.StateStopped, engine.StatePaused)
	if !errors.Is(err, engine.ErrBadSignature) || res.Recorded {
		t.Fatalf("resume of the written-back record: %+v %v, want refused", res, err)
	}
	if s, _, _ := rs.Desired(e.ctx, id); s != engine.StateCancelled {
		t.Fatalf("desired %q after a refused resume, want the cancel kept", s)
	}

	// The whole hash written back: data, version, pending control, seal.
	if err := e.rdb.Del(e.ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	for f, v := range saved {
		if err := e.rdb.HSet(e.ctx, key, f, v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rs.Get(e.ctx, id); !errors.Is(err, ErrRecordRolledBack) {
		t.Fatalf("Get of the written-back hash: %v, want ErrRecordRolledBack", err)
	}
	if _, _, err := rs.Desired(e.ctx, id); !errors.Is(err, ErrRecordRolledBack) {
		t.Fatalf("Desired of the written-back hash: %v, want ErrRecordRolledBack", err)
	}
	if len(*refused) < 4 {
		t.Fatalf("%d refusals reported, want each one", len(*refused))
	}
}

// TestDeletedPendingCancelIsDetected: with a cancel pending, deleting the
// pending-cancel field (alone, or with the version and seal) is seen:
// Desired refuses instead of reading "nothing asked", and a resume is not
// recorded, so no worker is asked to run the replay on.
func TestDeletedPendingCancelIsDetected(t *testing.T) {
	t.Parallel()
	e, _ := signedEnv(t)
	rs := e.st.Replays()
	id := "r_pendingcancel01"
	if err := rs.Create(e.ctx, engine.Replay{ID: id, DLQ: "orders.dlq", State: engine.StateStopped, Requester: "U1", Approver: "U2", Total: 5}); err != nil {
		t.Fatal(err)
	}
	if res, err := rs.DesireIf(e.ctx, id, engine.StateCancelled, "U3", engine.StateStopped); err != nil || !res.Recorded {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	key := e.st.b.k.replay(id)
	for _, fields := range [][]string{
		{fieldDesired},
		{fieldDesired, fieldDesiredBy},
		{fieldDesired, fieldDesiredBy, fieldSeal, fieldVersion},
	} {
		if err := e.rdb.HDel(e.ctx, key, fields...).Err(); err != nil {
			t.Fatal(err)
		}
		if s, _, err := rs.Desired(e.ctx, id); !errors.Is(err, engine.ErrBadSignature) {
			t.Fatalf("deleted %v: Desired %q %v, want refused", fields, s, err)
		}
		res, err := rs.DesireIf(e.ctx, id, engine.StateRunning, "U4", engine.StateStopped, engine.StatePaused)
		if !errors.Is(err, engine.ErrBadSignature) || res.Recorded {
			t.Fatalf("deleted %v: resume %+v %v, want refused", fields, res, err)
		}
		if s, _ := e.rdb.HGet(e.ctx, key, fieldDesired).Result(); s != "" {
			t.Fatalf("deleted %v: a refused resume wrote desired %q", fields, s)
		}
	}
}

// TestReplayVersionGrowsWithEveryWrite: create, update, desire, put and
// yield each write the next version, in the record and beside it.
func TestReplayVersionGrowsWithEveryWrite(t *testing.T) {
	t.Parallel()
	e, _ := signedEnv(t)
	rs, ls := e.st.Replays(), e.st.Leases()
	id := "r_versions01"
	version := func() int64 {
		t.Helper()
		h, ok, err := rs.readHash(e.ctx, e.rdb, id)
		if err != nil || !ok {
			t.Fatalf("read: %v %v", ok, err)
		}
		v, _ := recordVersion(h.data)
		if v != h.ver {
			t.Fatalf("record at version %d, hash at %d", v, h.ver)
		}
		return h.ver
	}
	r := engine.Replay{ID: id, DLQ: "orders.dlq", State: engine.StateQueued, Total: 5}
	if err := rs.Create(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	want := int64(1)
	if v := version(); v != want {
		t.Fatalf("created at version %d", v)
	}
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		want++
		if v := version(); v != want {
			t.Fatalf("after %s: version %d, want %d", what, v, want)
		}
	}
	step("update", rs.Update(e.ctx, id, func(x *engine.Replay) error { x.Note = "n"; return nil }))
	epoch, ok, err := ls.Acquire(e.ctx, id, "w1/a", time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	r.State = engine.StateRunning
	step("put", rs.Put(e.ctx, r, "w1/a", epoch))
	_, err = rs.DesireIf(e.ctx, id, engine.StatePaused, "U1", engine.StateRunning)
	step("desire", err)
	r.State = engine.StatePaused
	if err := rs.Yield(e.ctx, r, "w1/a", epoch, engine.StatePaused, engine.StateCancelled); !errors.Is(err, nil) {
		t.Fatalf("yield: %v", err)
	}
	want++
	if v := version(); v != want {
		t.Fatalf("after yield: version %d, want %d", v, want)
	}
	if s, by, err := rs.Desired(e.ctx, id); err != nil || s != engine.StatePaused || by != "U1" {
		t.Fatalf("desired after yield: %q %q %v", s, by, err)
	}
}

// TestUnverifiableRecordDoesNotFailTheList: of three replays, one written
// unsigned by a process without the key and one whose pending control was
// deleted: the list returns all three, the two marked unverifiable (their
// id alone), each reported; a Get of the good one still works.
func TestUnverifiableRecordDoesNotFailTheList(t *testing.T) {
	t.Parallel()
	e, refused := signedEnv(t)
	rs := e.st.Replays()
	for i, id := range []string{"r_list_good", "r_list_unsigned", "r_list_control"} {
		e.clock.Advance(time.Second)
		r := engine.Replay{ID: id, DLQ: "orders.dlq", State: engine.StatePaused, Approver: "U2", Total: 5 + i}
		if err := rs.Create(e.ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	keyless, err := New(Config{Prefix: e.st.b.cfg.Prefix}, e.rdb, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.Del(e.ctx, e.st.b.k.replay("r_list_unsigned")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := keyless.Replays().Create(e.ctx, engine.Replay{ID: "r_list_unsigned", DLQ: "orders.dlq", State: engine.StateQueued, Approver: "U9"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.DesireIf(e.ctx, "r_list_control", engine.StateCancelled, "U3", engine.StatePaused); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HDel(e.ctx, e.st.b.k.replay("r_list_control"), fieldDesired).Err(); err != nil {
		t.Fatal(err)
	}
	before := len(*refused)
	l, err := rs.List(e.ctx, 0)
	if err != nil || len(l) != 3 {
		t.Fatalf("List: %+v %v, want all three", l, err)
	}
	marked := map[string]bool{}
	for _, r := range l {
		if r.Unverifiable {
			marked[r.ID] = true
			if r.DLQ != "" || r.Approver != "" || r.State != "" {
				t.Errorf("unverifiable %s shows its contents: %+v", r.ID, r)
			}
		} else if r.ID != "r_list_good" || r.Approver != "U2" {
			t.Errorf("listed as verified: %+v", r)
		}
	}
	if !marked["r_list_unsigned"] || !marked["r_list_control"] || len(marked) != 2 {
		t.Fatalf("marked unverifiable: %v, want the unsigned and the edited one", marked)
	}
	if got := len(*refused) - before; got != 2 {
		t.Fatalf("%d refusals reported by the list, want 2", got)
	}
	if r, err := rs.Get(e.ctx, "r_list_good"); err != nil || r.Total != 5 {
		t.Fatalf("Get of the good one: %+v %v", r, err)
	}
}

// TestHighWaterIgnoresConcurrentReads: a read issued before a newer
// version was seen may return the older one (it was current then); a
// read issued after may not.
func TestHighWaterIgnoresConcurrentReads(t *testing.T) {
	t.Parallel()
	var h highWater
	early := h.start() // a read issued now, answered late with version 4
	if _, ok := h.check("r", 5, h.start()); !ok {
		t.Fatal("first version refused")
	}
	if _, ok := h.check("r", 4, early); !ok {
		t.Fatal("a read issued before version 5 was seen was refused for returning 4")
	}
	if seen, ok := h.check("r", 4, h.start()); ok || seen != 5 {
		t.Fatalf("a read issued after version 5 was seen returned 4: ok %v (seen %d), want refused", ok, seen)
	}
	if _, ok := h.check("r", 6, h.start()); !ok {
		t.Fatal("a newer version refused")
	}
}
