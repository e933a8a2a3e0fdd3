package ops_test

import (
	"context"
	"testing"
	"time"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/ops"
	"github.com/stroma/dlqbot/store"
)

// TestHandOffBeforeTheReadCheck: the terminal's hand-off of a replay its
// user approved or resumed. With a worker announced, the paused replay
// goes to the job queue (the store's, on Redis) whoever asks; the follow
// that comes with it checks `read`. A user who may replay but not read the
// DLQ leaves the replay with the worker, is refused the follow and is
// shown nothing of the replay; a reader follows it; with no worker
// announced nothing is handed out.
func TestHandOffBeforeTheReadCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, _, tr, st := newOpsOn(t, `principals:
  - name: alice
    os_users: [alice]
  - name: bob
    os_users: [bob]
roles:
  - name: sre
    principals: [alice]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
  - name: movers
    principals: [bob]
    grants:
      - queues: ["*"]
        actions: [replay, publish]
`, ops.Config{}, func(d *ops.Deps, st *store.Store) {
		d.Workers, d.Jobs = st.Workers(), st.Jobs()
	})
	p := o.Policy()
	jobs := func() int64 {
		t.Helper()
		n, err := st.Jobs().Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	alice, bob := ops.TerminalCaller(p, "alice"), ops.TerminalCaller(p, "bob")

	// No worker announced: nothing is handed out, the caller runs it.
	if w, r, err := o.HandOff(ctx, alice, "r_1"); err != nil || w != 0 || r.ID != "r_1" || jobs() != 0 {
		t.Fatalf("no worker: %d worker(s), replay %q, %d job(s), %v; want 0, r_1, 0, nil", w, r.ID, jobs(), err)
	}

	if err := st.Workers().Announce(ctx, "w1", time.Minute); err != nil {
		t.Fatal(err)
	}
	w, r, err := o.HandOff(ctx, bob, "r_1")
	if code(err) != ops.Forbidden || w != 1 {
		t.Fatalf("bob: %d worker(s), %v; want 1 and refused as forbidden", w, err)
	}
	if r.ID != "" || r.DLQ != "" || r.Token != "" {
		t.Fatalf("bob, who may not read the DLQ, was shown %+v", r)
	}
	if n := jobs(); n != 1 {
		t.Fatalf("%d job(s) after bob's hand-off; want the replay handed to the worker", n)
	}
	if es := tr.Find("", audit.OpFollow, audit.OutcomeRefused); len(es) != 1 || es[0].ReplayID != "r_1" {
		t.Fatalf("the trail has %+v; want bob's follow of r_1 refused", es)
	}

	if w, r, err := o.HandOff(ctx, alice, "r_1"); err != nil || w != 1 || r.ID != "r_1" || r.DLQ != "q" || jobs() != 2 {
		t.Fatalf("alice: %d worker(s), replay %+v, %d job(s), %v; want 1, r_1 of q, 2 jobs", w, r, jobs(), err)
	}
}
