package store

import (
	"errors"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

func TestDesireIfChecksStateAndOwnerAtomically(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rs, ls := e.st.Replays(), e.st.Leases()
	if err := rs.Create(e.ctx, engine.Replay{ID: "r_q", State: engine.StatePaused}); err != nil {
		t.Fatal(err)
	}
	// Pause is not allowed from paused: refused, nothing recorded.
	res, err := rs.DesireIf(e.ctx, "r_q", engine.StatePaused, "U1", engine.StateQueued, engine.StateRunning)
	if err != nil || res.Recorded || res.Refused != engine.RefusedState || res.State != engine.StatePaused {
		t.Fatalf("pause of a paused replay: %+v %v", res, err)
	}
	if s, _, _ := rs.Desired(e.ctx, "r_q"); s != "" {
		t.Fatalf("a refused desire was recorded: %q", s)
	}
	res, err = rs.DesireIf(e.ctx, "r_q", engine.StateRunning, "U2", engine.StatePaused, engine.StateStopped)
	if err != nil || !res.Recorded || res.Owned || res.State != engine.StatePaused {
		t.Fatalf("resume of a paused replay: %+v %v", res, err)
	}
	if s, by, _ := rs.Desired(e.ctx, "r_q"); s != engine.StateRunning || by != "U2" {
		t.Fatalf("desired %q by %q", s, by)
	}
	// Once a cancel is asked for, only a cancel may follow.
	if res, err := rs.DesireIf(e.ctx, "r_q", engine.StateCancelled, "U3", engine.StatePaused); err != nil || !res.Recorded {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	res, err = rs.DesireIf(e.ctx, "r_q", engine.StateRunning, "U4", engine.StatePaused)
	if err != nil || res.Recorded || res.Refused != engine.RefusedCancelling {
		t.Fatalf("resume after cancel: %+v %v", res, err)
	}
	// Running needs an owner.
	if err := rs.Create(e.ctx, engine.Replay{ID: "r_run", State: engine.StateRunning}); err != nil {
		t.Fatal(err)
	}
	res, _ = rs.DesireIf(e.ctx, "r_run", engine.StatePaused, "U1", engine.StateRunning)
	if res.Recorded || res.Refused != engine.RefusedOwnerGone {
		t.Fatalf("pause of an ownerless running replay: %+v", res)
	}
	if _, ok, err := ls.Acquire(e.ctx, "r_run", "w1/a", time.Minute); err != nil || !ok {
		t.Fatal(ok, err)
	}
	res, _ = rs.DesireIf(e.ctx, "r_run", engine.StatePaused, "U1", engine.StateRunning)
	if !res.Recorded || !res.Owned {
		t.Fatalf("pause of an owned running replay: %+v", res)
	}
	if _, err := rs.DesireIf(e.ctx, "r_none", engine.StatePaused, "U1", engine.StateRunning); !errors.Is(err, engine.ErrReplayNotFound) {
		t.Fatalf("unknown replay: %v", err)
	}
}

func TestYieldWritesReleasesAndRespectsANewDesire(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rs, ls := e.st.Replays(), e.st.Leases()
	r := engine.Replay{ID: "r_y", State: engine.StateQueued}
	if err := rs.Create(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	epoch, ok, err := ls.Acquire(e.ctx, "r_y", "w1/a", time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	r.State = engine.StateRunning
	if err := rs.Put(e.ctx, r, "w1/a", epoch); err != nil {
		t.Fatal(err)
	}
	if err := rs.Desire(e.ctx, "r_y", engine.StatePaused, "U1"); err != nil {
		t.Fatal(err)
	}
	// A resume came in after the owner decided to pause: refused.
	if err := rs.Desire(e.ctx, "r_y", engine.StateRunning, "U2"); err != nil {
		t.Fatal(err)
	}
	r.State = engine.StatePaused
	if err := rs.Yield(e.ctx, r, "w1/a", epoch, engine.StatePaused, engine.StateRunning, engine.StateCancelled); !errors.Is(err, engine.ErrDesireChanged) {
		t.Fatalf("yield against a newer resume: %v", err)
	}
	if got, _ := rs.Get(e.ctx, "r_y"); got.State != engine.StateRunning {
		t.Fatalf("state %s after a refused yield", got.State)
	}
	if owner, _ := ls.Owner(e.ctx, "r_y"); owner != "w1/a" {
		t.Fatalf("lease %q after a refused yield", owner)
	}
	// Another run of the same worker does not pass for this one.
	if err := rs.Yield(e.ctx, r, "w1/b", epoch, engine.StatePaused); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("yield by another run: %v", err)
	}
	// The desire matches: written, desired state set, lease released.
	if err := rs.Desire(e.ctx, "r_y", engine.StatePaused, "U3"); err != nil {
		t.Fatal(err)
	}
	if err := rs.Yield(e.ctx, r, "w1/a", epoch, engine.StatePaused, engine.StateRunning, engine.StateCancelled); err != nil {
		t.Fatal(err)
	}
	got, _ := rs.Get(e.ctx, "r_y")
	want, _, _ := rs.Desired(e.ctx, "r_y")
	owner, _ := ls.Owner(e.ctx, "r_y")
	if got.State != engine.StatePaused || want != engine.StatePaused || owner != "" {
		t.Fatalf("after yield: state %s, desired %q, lease %q", got.State, want, owner)
	}
}
