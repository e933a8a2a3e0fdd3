package chaos

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestChaosConnectionsClosed runs a replay of 1,000 dead letters on a
// `dlqbot serve` worker and closes every broker connection of that server,
// through the management API, 10 times while the replay sends. Each time it
// records what the replay did (stopped, paused, or carried on) and resumes
// it with `dlqbot resume` when it ended. At the end nothing may be lost, and
// every delivery must be listed in the replay's ledger.
func TestChaosConnectionsClosed(t *testing.T) {
	gate(t)
	const n, faults = 1000, 10
	rng := rand.New(rand.NewPCG(seed(t), 2))
	name := testkit.Name("chaos-conn")
	f := newFixture(t, n, "", map[string]string{"DLQBOT_CONNECTION_NAME": name})
	srv := start(t, f.with("DLQBOT_HTTP_ADDR", freeAddr(t)), "serve")
	f.workers(t, 1)
	p := f.preview(t)
	// rate=12: the replay sends for 80 s, long enough for 10 faults that
	// each wait for the server's new connection to show in the management
	// API (up to a statistics interval, 5 s).
	follower := start(t, f.env, "replay", p.Token, "step=1000", "cap=1000", "rate=12", "timeout=20s", "--json")
	id := f.replayOf(t, p.Token, follower)
	if id == "" {
		t.Fatal("the replay was not approved")
	}
	began := time.Now()
	outcomes := map[string]int{}
	var notes []string
	closed := 0
	for i := 0; i < faults; i++ {
		// Wait for the replay to be sending on a connection the management
		// API lists, plus a random number of deliveries.
		base, extra := f.total(), 5+rng.IntN(30)
		testkit.Eventually(t, time.Minute, fmt.Sprintf("fault %d: the replay sending on a listed connection", i+1), func() bool {
			if s := f.state(id).State; s.Terminal() {
				t.Fatalf("the replay ended (%s) after %d faults: it went too fast for %d", s, i, faults)
			}
			return f.state(id).State == engine.StateRunning && f.total() >= base+extra && testkit.CountConnections(t, name) > 0
		})
		waited := time.Since(began)
		before := f.state(id)
		if before.Sent >= n {
			t.Fatalf("the replay sent everything after %d faults: too fast for %d", i, faults)
		}
		closed += testkit.CloseConnections(t, name)
		atClose := f.total()
		// What did the replay do? Either it ended (and is resumed), or it
		// carried on sending on a new connection.
		var r engine.Replay
		testkit.Eventually(t, time.Minute, fmt.Sprintf("fault %d: the replay to react", i+1), func() bool {
			r = f.state(id)
			return r.State != engine.StateRunning || f.total() >= atClose+10
		})
		outcome := string(r.State)
		if r.State == engine.StateRunning {
			outcome = "carried on"
		}
		outcomes[outcome]++
		t.Logf("fault %d at %s (sent %d, delivered %d): %s, sent %d, failed %d, duplicates %d: %s", i+1, waited.Round(100*time.Millisecond), before.Sent, atClose, outcome, r.Sent, r.Failed, r.Duplicates, r.Note)
		if r.Note != "" && len(notes) < 3 {
			notes = append(notes, r.Note)
		}
		switch r.State {
		case engine.StateStopped, engine.StatePaused:
			f.settled(t)
			// `dlqbot resume` follows the replay until it ends or stops
			// again (the next fault): run it beside the loop.
			start(t, f.env, "resume", id, "--json")
		case engine.StateRunning:
		default:
			t.Fatalf("fault %d left the replay %s: %s", i+1, r.State, r.Note)
		}
	}
	var r engine.Replay
	testkit.Eventually(t, 3*time.Minute, "the replay to finish", func() bool {
		r = f.state(id)
		if endsInDoubt(r) {
			return true
		}
		if r.State == engine.StateStopped || r.State == engine.StatePaused {
			_, _, _ = cli(t, f.env, "resume", id)
		}
		return r.State == engine.StateFinished
	})
	took := time.Since(began).Round(time.Second)
	a := f.accountFor(t, []string{id})
	if len(a.Lost) > 0 {
		t.Errorf("lost %d: %v", len(a.Lost), a.Lost)
	}
	if a.Unaccounted > 0 || a.DupUnrecorded > 0 {
		t.Errorf("%d deliveries and %d duplicates are not listed in the ledger", a.Unaccounted, a.DupUnrecorded)
	}
	if srv.Exited() {
		t.Errorf("the server exited:\n%s", srv.Output())
	}
	var oc []string
	for k, v := range outcomes {
		oc = append(oc, fmt.Sprintf("%d %s", v, k))
	}
	sort.Strings(oc)
	figure(t, "connections", "%d closures of all the server's broker connections (%d connections closed) during one replay in %s; after each the replay: %s; finished with %d sent, %d not delivered and %d duplicates recorded (their originals kept in the DLQ) — %s",
		faults, closed, took, strings.Join(oc, ", "), r.Sent, r.Failed, r.Duplicates, a)
	if len(notes) > 0 {
		t.Logf("notes: %q", notes)
	}
}

// endsInDoubt reports whether r stopped with everything sent but copies in
// doubt (their confirm lost with a connection): such a replay never
// finishes, since a copy in doubt is never sent again, and `dlqbot resume`
// exits 1 saying so. Losing nothing is checked apart.
func endsInDoubt(r engine.Replay) bool {
	return r.State == engine.StateStopped && r.InDoubt > 0 && r.Sent+r.InDoubt >= r.Total
}
