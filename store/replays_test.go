package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

func TestReplayCreateGetList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rs := e.st.Replays()
	for i := range 3 {
		r := engine.Replay{ID: fmt.Sprintf("r_%d", i), DLQ: "orders.dlq", State: engine.StateQueued, Total: 10 * i}
		if err := rs.Create(e.ctx, r); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
	}
	if err := rs.Create(e.ctx, engine.Replay{ID: "r_1"}); !errors.Is(err, ErrReplayExists) {
		t.Errorf("create twice: %v", err)
	}
	if err := rs.Create(e.ctx, engine.Replay{ID: "r_{x}"}); err == nil {
		t.Error("id with braces accepted")
	}
	got, err := rs.Get(e.ctx, "r_1")
	if err != nil || got.Total != 10 || got.DLQ != "orders.dlq" || got.CreatedAt.IsZero() {
		t.Errorf("get: %+v %v", got, err)
	}
	if _, err := rs.Get(e.ctx, "r_nope"); !errors.Is(err, engine.ErrReplayNotFound) {
		t.Errorf("get unknown: %v", err)
	}
	list, err := rs.List(e.ctx, 2)
	if err != nil || len(list) != 2 || list[0].ID != "r_2" || list[1].ID != "r_1" {
		t.Errorf("list 2: %+v %v", list, err)
	}
	// An expired record drops out of the index.
	e.rdb.Del(e.ctx, e.st.b.k.replay("r_2"))
	list, err = rs.List(e.ctx, 0)
	if err != nil || len(list) != 2 || list[0].ID != "r_1" {
		t.Errorf("list all: %+v %v", list, err)
	}
	if n := e.rdb.ZCard(e.ctx, e.st.b.k.replays()).Val(); n != 2 {
		t.Errorf("index holds %d", n)
	}
}

func TestReplayFencedPut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rs, ls := e.st.Replays(), e.st.Leases()
	r := engine.Replay{ID: "r_f", State: engine.StateQueued}
	if err := rs.Create(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	epoch1, ok, err := ls.Acquire(e.ctx, r.ID, "w1", time.Minute)
	if err != nil || !ok || epoch1 < 1 {
		t.Fatalf("acquire: %d %v %v", epoch1, ok, err)
	}
	r.State, r.Sent = engine.StateRunning, 5
	if err := rs.Put(e.ctx, r, "w1", epoch1); err != nil {
		t.Fatalf("owner put: %v", err)
	}
	if err := rs.Put(e.ctx, r, "w2", epoch1); !errors.Is(err, engine.ErrLeaseLost) {
		t.Errorf("put by another owner: %v", err)
	}
	if err := ls.Release(e.ctx, r.ID, "w1"); err != nil {
		t.Fatal(err)
	}
	if err := rs.Put(e.ctx, r, "w1", epoch1); !errors.Is(err, engine.ErrLeaseLost) {
		t.Errorf("put after release: %v", err)
	}
	epoch2, ok, err := ls.Acquire(e.ctx, r.ID, "w1", time.Minute)
	if err != nil || !ok || epoch2 <= epoch1 {
		t.Fatalf("re-acquire: %d (was %d) %v %v", epoch2, epoch1, ok, err)
	}
	if err := rs.Put(e.ctx, r, "w1", epoch1); !errors.Is(err, engine.ErrLeaseLost) {
		t.Errorf("put with a stale epoch: %v", err)
	}
	if err := rs.Put(e.ctx, engine.Replay{ID: "r_none"}, "w1", epoch2); !errors.Is(err, engine.ErrLeaseLost) {
		t.Errorf("put without lease on an unknown replay: %v", err)
	}
	got, _ := rs.Get(e.ctx, r.ID)
	if got.Sent != 5 || got.State != engine.StateRunning {
		t.Errorf("stored: %+v", got)
	}
	if err := ls.Release(e.ctx, r.ID, "w1"); err != nil {
		t.Fatal(err)
	}
	// Expiry: a short real TTL, polled.
	epoch3, ok, err := ls.Acquire(e.ctx, r.ID, "w3", 200*time.Millisecond)
	if err != nil || !ok {
		t.Fatalf("acquire short: %v %v", ok, err)
	}
	if err := rs.Put(e.ctx, r, "w3", epoch3); err != nil {
		t.Fatalf("put before expiry: %v", err)
	}
	eventually(t, 5*time.Second, "lease expiry", func() bool {
		owner, err := ls.Owner(e.ctx, r.ID)
		return err == nil && owner == ""
	})
	if err := rs.Put(e.ctx, r, "w3", epoch3); !errors.Is(err, engine.ErrLeaseLost) {
		t.Errorf("put after expiry: %v", err)
	}
	if err := ls.Extend(e.ctx, r.ID, "w3", time.Minute); !errors.Is(err, engine.ErrLeaseLost) {
		t.Errorf("extend after expiry: %v", err)
	}
}

func TestReplayUpdate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rs := e.st.Replays()
	if err := rs.Create(e.ctx, engine.Replay{ID: "r_u", State: engine.StateRunning}); err != nil {
		t.Fatal(err)
	}
	const n = 10
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = rs.Update(e.ctx, "r_u", func(r *engine.Replay) error { r.Settled++; return nil })
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := rs.Get(e.ctx, "r_u"); got.Settled != n {
		t.Errorf("settled %d after %d concurrent updates", got.Settled, n)
	}
	stop := errors.New("no change")
	if err := rs.Update(e.ctx, "r_u", func(*engine.Replay) error { return stop }); err != stop {
		t.Errorf("fn error: %v", err)
	}
	if err := rs.Update(e.ctx, "r_none", func(*engine.Replay) error { return nil }); !errors.Is(err, engine.ErrReplayNotFound) {
		t.Errorf("update unknown: %v", err)
	}
	// The reaper: interrupted once, and never while someone holds the lease.
	if _, ok, _ := e.st.Leases().Acquire(e.ctx, "r_u", "w1", time.Minute); !ok {
		t.Fatal("acquire failed")
	}
	interrupt := func(r *engine.Replay) error {
		if r.State != engine.StateRunning {
			return stop
		}
		r.State = engine.StateInterrupted
		return nil
	}
	if err := rs.UpdateUnowned(e.ctx, "r_u", interrupt); !errors.Is(err, ErrLeaseHeld) {
		t.Errorf("update while leased: %v", err)
	}
	_ = e.st.Leases().Release(e.ctx, "r_u", "w1")
	if err := rs.UpdateUnowned(e.ctx, "r_u", interrupt); err != nil {
		t.Fatal(err)
	}
	if err := rs.UpdateUnowned(e.ctx, "r_u", interrupt); err != stop {
		t.Errorf("second interrupt: %v", err)
	}
	if got, _ := rs.Get(e.ctx, "r_u"); got.State != engine.StateInterrupted || got.Settled != n {
		t.Errorf("after reaping: %+v", got)
	}
}

func TestReplayDesire(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rs := e.st.Replays()
	if err := rs.Create(e.ctx, engine.Replay{ID: "r_d", State: engine.StateRunning}); err != nil {
		t.Fatal(err)
	}
	if s, _, err := rs.Desired(e.ctx, "r_d"); err != nil || s != "" {
		t.Errorf("desired before: %q %v", s, err)
	}
	if err := rs.Desire(e.ctx, "r_d", engine.StatePaused, "U1"); err != nil {
		t.Fatal(err)
	}
	if s, by, err := rs.Desired(e.ctx, "r_d"); err != nil || s != engine.StatePaused || by != "U1" {
		t.Errorf("desired: %q %v", s, err)
	}
	if err := rs.Desire(e.ctx, "r_none", engine.StateCancelled, "U1"); !errors.Is(err, engine.ErrReplayNotFound) {
		t.Errorf("desire unknown: %v", err)
	}
	if _, _, err := rs.Desired(e.ctx, "r_none"); !errors.Is(err, engine.ErrReplayNotFound) {
		t.Errorf("desired unknown: %v", err)
	}
	if err := rs.Desire(e.ctx, "r_d", "sideways", "U1"); err == nil {
		t.Error("unknown state accepted")
	}
}
