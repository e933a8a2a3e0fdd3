package chaos

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// readerTally counts the runs of one command of the reader loop.
type readerTally struct {
	runs, failed int
	// failedAfterOK counts failures after a run of the same command had
	// succeeded (the replay existed then); firstErr is the first of them.
	failedAfterOK int
	ok            bool
	lastErr       string
	firstErr      string
}

// TestChaosReadersDuringReplay runs a canary replay of 1,000 dead letters
// (steps 10, 20, 40… at 50/s) with `dlqbot replay` while two loops run
// `dlqbot preview <dlq> --json` and `dlqbot check <replay> --json` back to
// back: other readers of the same DLQ, holding its messages for a moment.
// Nothing may be lost, every duplicate must be in the ledger, and a replay
// that ends "finished" must have sent every message (sent == total,
// missing == 0), as the broker shows (DLQ empty, every message delivered).
// It runs on RabbitMQ 3.10 with a classic DLQ and on 4.0 with a quorum one.
func TestChaosReadersDuringReplay(t *testing.T) {
	gate(t)
	eachTarget(t, readersDuringReplay)
}

func readersDuringReplay(t *testing.T, tg target) {
	const n = 1000
	f := newFixtureOn(t, tg, n, "", nil)
	p := f.preview(t)
	follower := start(t, f.env, "replay", p.Token, "step=10", "cap=500", "rate=50", "timeout=20s", "--json")
	id := f.replayOf(t, p.Token, follower)
	if id == "" {
		t.Fatal("the replay was not approved")
	}
	began := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	tallies := map[string]*readerTally{"preview": {}, "check": {}}
	loop := func(verb string, args ...string) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			out, errOut, code := cli(t, f.env, args...)
			ok := code == 0 && json.Valid([]byte(out))
			mu.Lock()
			tl := tallies[verb]
			tl.runs++
			if !ok {
				tl.failed++
				tl.lastErr = fmt.Sprintf("after %s: exit %d: %s %s", time.Since(began).Round(100*time.Millisecond), code, tail(out, 300), tail(errOut, 300))
				if tl.ok {
					tl.failedAfterOK++
					if tl.firstErr == "" {
						tl.firstErr = tl.lastErr
					}
				}
			}
			tl.ok = tl.ok || ok
			mu.Unlock()
		}
	}
	wg.Add(2)
	go loop("preview", "preview", f.dlq, "--json")
	go loop("check", "check", id, "--json")
	var r engine.Replay
	testkit.Eventually(t, 4*time.Minute, "the replay to end", func() bool {
		r = f.state(id)
		return r.State != engine.StateRunning && r.State != engine.StateQueued && follower.Exited()
	})
	close(stop)
	wg.Wait()
	took := time.Since(began).Round(time.Second)
	t.Logf("replay %s after %s: sent %d of %d, missing %d, failed %d, duplicates %d: %s", r.State, took, r.Sent, r.Total, r.Missing, r.Failed, r.Duplicates, r.Note)
	for verb, tl := range tallies {
		if tl.failed > 0 {
			t.Logf("%s: %d of %d runs failed, last: %s", verb, tl.failed, tl.runs, tl.lastErr)
		}
		if tl.failedAfterOK > 0 {
			t.Errorf("%s: %d runs failed after one had succeeded; the first: %s", verb, tl.failedAfterOK, tl.firstErr)
		}
	}
	inDLQ := f.rabbit.Count(f.dlq)
	if r.State == engine.StateFinished {
		if r.Sent != r.Total || r.Missing != 0 {
			t.Errorf("the replay finished with sent %d of %d, missing %d", r.Sent, r.Total, r.Missing)
		}
		testkit.Eventually(t, time.Minute, "every message delivered", func() bool { return len(f.delivered()) >= n })
		if inDLQ != 0 {
			t.Errorf("the replay finished but the DLQ still holds %d messages", inDLQ)
		}
	}
	ids := []string{id}
	if r.State != engine.StateFinished {
		ids = append(ids, f.finish(t)...)
	}
	a := f.accountFor(t, ids)
	if len(a.Lost) > 0 {
		t.Errorf("lost %d: %v", len(a.Lost), a.Lost)
	}
	if a.Unaccounted > 0 || a.DupUnrecorded > 0 {
		t.Errorf("%d deliveries and %d duplicates are not listed in the ledger", a.Unaccounted, a.DupUnrecorded)
	}
	pv, ck := tallies["preview"], tallies["check"]
	figure(t, tg.figureName("readers"), "%s: replay of %d (steps from 10, rate 50/s) with %d previews (%d failed, %d after one had succeeded) and %d checks (%d failed, %d after one had succeeded) of the same DLQ and replay running back to back: replay %s in %s, %d sent of %d, %d missing, %d not delivered, %d duplicates, DLQ then %d — %s",
		tg.name, n, pv.runs, pv.failed, pv.failedAfterOK, ck.runs, ck.failed, ck.failedAfterOK, r.State, took, r.Sent, r.Total, r.Missing, r.Failed, r.Duplicates, inDLQ, a)
}
