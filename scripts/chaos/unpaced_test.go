package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestChaosUnpacedConnectionClosed runs an unpaced replay (rate=max) of
// 4,990 dead letters (after a first replay of 10) on a `dlqbot serve` worker and closes every broker
// connection of that server as soon as deliveries start, in up to 3 rounds
// (resuming the replay after each). An unpaced replay waits for confirms
// on a path the paced runs never take (issue 12: it hung at full CPU): each
// close must end the replay (stopped, paused or finished) within 60 s, and
// at the end nothing may be lost and every duplicate must be in a ledger.
// It runs on RabbitMQ 3.10 with a classic DLQ and on 4.0 with a quorum one.
func TestChaosUnpacedConnectionClosed(t *testing.T) {
	gate(t)
	eachTarget(t, unpacedConnectionClosed)
}

func unpacedConnectionClosed(t *testing.T, tg target) {
	const n, rounds, limit = 5000, 3, 60 * time.Second
	name := testkit.Name("chaos-unpaced")
	f := newFixtureOn(t, tg, n, "", map[string]string{"DLQBOT_CONNECTION_NAME": name})
	srv := start(t, f.with("DLQBOT_HTTP_ADDR", freeAddr(t)), "serve")
	f.workers(t, 1)
	// The server dials on first use and keeps its connection: a first
	// replay of 10 opens it, so that it is listed before the unpaced replay
	// starts (which may be over before a new connection shows).
	warm := f.preview(t, "limit=10")
	warmer := start(t, f.env, "replay", warm.Token, "step=10", "rate=max", "timeout=20s", "--json")
	warmID := f.replayOf(t, warm.Token, warmer)
	if warmID == "" {
		t.Fatal("the first replay was not approved")
	}
	testkit.Eventually(t, time.Minute, "the first replay to finish", func() bool { return f.state(warmID).State == engine.StateFinished })
	testkit.Eventually(t, time.Minute, "the server's connection listed", func() bool { return f.on.CountConnections(t, name) > 0 })
	f.settled(t)
	p := f.preview(t)
	follower := start(t, f.env, "replay", p.Token, "step=5000", "cap=5000", "rate=max", "timeout=20s", "--json")
	id := f.replayOf(t, p.Token, follower)
	if id == "" {
		t.Fatal("the replay was not approved")
	}
	began := time.Now()
	var outcomes, ends []string
	unread := 0 // polls of the record that found none (reported)
	for i := 0; i < rounds; i++ {
		// Close as soon as deliveries start again (poll the target's count).
		base := f.total()
		testkit.Eventually(t, time.Minute, fmt.Sprintf("round %d: deliveries", i+1), func() bool {
			return f.total() > base || ended(f.state(id).State)
		})
		if s := f.state(id).State; ended(s) {
			outcomes = append(outcomes, fmt.Sprintf("round %d: already %s before the close", i+1, s))
			break
		}
		atClose, sentAt := f.total(), f.state(id).Sent
		closed := f.on.CloseConnections(t, name)
		closedAt := time.Now()
		if closed == 0 {
			// The connection was replaced and is not listed yet: retry.
			testkit.Eventually(t, 15*time.Second, "a connection to close", func() bool {
				closed = f.on.CloseConnections(t, name)
				return closed > 0 || ended(f.state(id).State)
			})
			closedAt = time.Now()
		}
		var r engine.Replay
		done := false
		for time.Since(closedAt) < limit {
			r = f.state(id)
			if r.State == "" {
				unread++ // the record could not be read this time
			}
			if ended(r.State) {
				done = true
				break
			}
			time.Sleep(50 * time.Millisecond) // polling interval
		}
		took := time.Since(closedAt).Round(100 * time.Millisecond)
		if !done {
			t.Errorf("round %d: the replay still runs %s after its connection was closed (sent %d, delivered %d); server output:\n%s", i+1, limit, r.Sent, f.total(), tail(srv.Output(), 3000))
			break
		}
		outcomes = append(outcomes, fmt.Sprintf("round %d (closed %d at %d delivered, %d sent): %s after %s", i+1, closed, atClose, sentAt, r.State, took))
		ends = append(ends, took.String())
		t.Logf("round %d: closed %d connections at %d deliveries; %s after %s: sent %d, failed %d, duplicates %d, in doubt %d: %s", i+1, closed, atClose, r.State, took, r.Sent, r.Failed, r.Duplicates, r.InDoubt, r.Note)
		switch r.State {
		case engine.StateStopped, engine.StatePaused:
			if i == rounds-1 {
				break
			}
			f.settled(t)
			// Resume in the background (the command follows the replay to
			// its end), and wait until it runs again.
			rp := start(t, f.env, "resume", id, "--json")
			testkit.Eventually(t, time.Minute, fmt.Sprintf("round %d: the replay resumed", i+1), func() bool {
				return f.state(id).State == engine.StateRunning || rp.Exited()
			})
		case engine.StateFinished:
			i = rounds
		default:
			t.Errorf("round %d left the replay %s: %s", i+1, r.State, r.Note)
			i = rounds
		}
	}
	// Resume once more after the last round, to the end: copies in doubt
	// are never sent again, so a replay with any ends stopped ("not
	// finished"), its originals left in the DLQ.
	var r engine.Replay
	testkit.Eventually(t, time.Minute, "the replay to end", func() bool {
		r = f.state(id)
		return ended(r.State)
	})
	if r.State == engine.StateStopped || r.State == engine.StatePaused {
		f.settled(t)
		out, errOut, code := cli(t, f.env, "resume", id, "--json")
		t.Logf("last resume: exit %d %s", code, tail(errOut, 500))
		_ = out
		testkit.Eventually(t, time.Minute, "the resumed replay to end", func() bool {
			r = f.state(id)
			return ended(r.State)
		})
	}
	if r.State != engine.StateFinished && !(r.State == engine.StateStopped && r.InDoubt > 0 && r.Sent+r.InDoubt+r.Failed+r.Missing >= r.Total) {
		t.Errorf("the replay ended %s (%s): neither finished nor stopped for copies in doubt only", r.State, r.Note)
	}
	ids := []string{warmID, id}
	took := time.Since(began).Round(time.Second)
	a := f.accountFor(t, ids)
	if len(a.Lost) > 0 {
		t.Errorf("lost %d: %v", len(a.Lost), a.Lost)
	}
	if a.Unaccounted > 0 || a.DupUnrecorded > 0 {
		t.Errorf("%d deliveries and %d duplicates are not listed in the ledger", a.Unaccounted, a.DupUnrecorded)
	}
	if unread > 0 {
		t.Logf("%d polls of replay %s's record found none while it existed", unread, id)
	}
	figure(t, tg.figureName("unpaced_connections"), "%s: unpaced replay (rate=max) of %d, all the server's broker connections closed as soon as deliveries started, %d rounds: %s; replay ended %s with %d sent, %d not delivered, %d duplicates, %d in doubt, in %s — %s",
		tg.name, n, len(ends), strings.Join(outcomes, "; "), r.State, r.Sent, r.Failed, r.Duplicates, r.InDoubt, took, a)
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// ended reports whether a replay in state s no longer sends: stopped,
// paused, or a final state ("" is an unreadable record, not an end).
func ended(s engine.State) bool {
	return s == engine.StateStopped || s == engine.StatePaused || s.Terminal()
}
