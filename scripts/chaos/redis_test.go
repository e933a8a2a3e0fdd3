package chaos

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/clustertest"
	"github.com/stroma/dlqbot/internal/testkit"
)

// outage is how long Redis stays down once the server noticed: a fault's
// length, not a synchronisation delay.
const outage = 3 * time.Second

// TestChaosRedisRestart runs a replay of 1,000 dead letters on a
// `dlqbot serve` worker whose Redis is a private redis-server, SIGKILLs that
// Redis after 300 deliveries, keeps it down for 3 s after the server's
// /readyz noticed, and starts it again. With persistence (appendonly,
// fsync always) the records survive the restart; without it, Redis comes
// back empty. It reports what the replay did, then replays what is left in
// the DLQ, and checks that nothing was lost.
func TestChaosRedisRestart(t *testing.T) {
	gate(t)
	if err := clustertest.Available(); err != nil {
		t.Skipf("cannot start a private Redis: %v", err)
	}
	t.Run("persistent", func(t *testing.T) {
		redisRestart(t, "redis_restart_aof", "--appendonly", "yes", "--appendfsync", "always")
	})
	t.Run("empty", func(t *testing.T) {
		redisRestart(t, "redis_restart_empty", "--appendonly", "no")
	})
}

func redisRestart(t *testing.T, name string, redisArgs ...string) {
	const n = 1000
	rs := clustertest.StartServer(t, redisArgs...)
	f := newFixture(t, n, rs.URL(), nil)
	addr := freeAddr(t)
	srv := start(t, f.with("DLQBOT_HTTP_ADDR", addr), "serve")
	f.workers(t, 1)
	p := f.preview(t)
	follower := start(t, f.env, "replay", p.Token, "step=1000", "cap=1000", "rate=200", "timeout=20s", "--json")
	id := f.replayOf(t, p.Token, follower)
	if id == "" {
		t.Fatal("the replay was not approved")
	}
	testkit.Eventually(t, time.Minute, "300 deliveries", func() bool { return f.total() >= 300 })
	rs.Kill()
	killed, atKill := time.Now(), f.total()
	testkit.Eventually(t, 30*time.Second, "the server's /readyz to report Redis down", func() bool { return readyz(addr) == 503 })
	noticed := time.Since(killed)
	<-time.After(outage)
	rs.Start()
	down := time.Since(killed)
	atRestart := f.total()
	testkit.Eventually(t, 30*time.Second, "the server's /readyz to recover", func() bool { return readyz(addr) == 200 })

	// What became of the replay: it ends in some state, or its record is
	// gone with Redis's data.
	var r engine.Replay
	gone := false
	testkit.Eventually(t, time.Minute, "the replay to end or vanish", func() bool {
		got, err := f.st.Replays().Get(context.Background(), id)
		if errors.Is(err, engine.ErrReplayNotFound) {
			gone = true
			return true
		}
		r = got
		return err == nil && r.State != engine.StateRunning && r.State != engine.StateQueued
	})
	outcome := fmt.Sprintf("ended %s (%d sent): %q", r.State, r.Sent, r.Note)
	if gone {
		outcome = "lost its record with Redis's data, and its worker stopped sending (lease gone)"
	}
	// Did anything keep sending after the restart? Wait for deliveries to
	// stop, then see whether the worker sent after Redis came back.
	f.settled(t)
	afterRestart := f.total() - atRestart
	replays := []string{id}
	if !gone {
		switch r.State {
		case engine.StatePaused, engine.StateStopped:
			if out, errOut, code := cli(t, f.env, "resume", id); code != 0 {
				t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
			}
			testkit.Eventually(t, 2*time.Minute, "the resumed replay to end", func() bool {
				r = f.state(id)
				return r.State.Terminal() || r.State == engine.StateStopped
			})
			outcome += fmt.Sprintf("; resumed: %s (%d sent)", r.State, r.Sent)
		}
	}
	f.settled(t)
	replays = append(replays, f.finish(t)...)
	a := f.accountFor(t, replays)
	if len(a.Lost) > 0 {
		t.Errorf("lost %d: %v", len(a.Lost), a.Lost)
	}
	if a.InDLQ > 0 {
		t.Errorf("%d messages left in the DLQ after the finishing replays", a.InDLQ)
	}
	if !gone && (a.Unaccounted > 0 || a.DupUnrecorded > 0) {
		t.Errorf("%d deliveries and %d duplicates are not listed in a ledger although Redis kept its data", a.Unaccounted, a.DupUnrecorded)
	}
	if srv.Exited() {
		t.Errorf("the server exited:\n%s", srv.Output())
	}
	figure(t, name, "Redis (%v) SIGKILLed after %d deliveries, /readyz noticed in %s, down %s, %d deliveries while down; the replay %s; %d deliveries after the restart; then %d more replay(s) of the rest — %s",
		redisArgs, atKill, noticed.Round(100*time.Millisecond), down.Round(100*time.Millisecond), atRestart-atKill, outcome, afterRestart, len(replays)-1, a)
}
