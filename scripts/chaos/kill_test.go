package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// TestChaosSIGKILL replays 1,000 dead letters with `dlqbot replay` (the
// terminal acting as the worker) and SIGKILLs the replaying process at 20
// random points, chosen as cumulative delivery counts. After each kill the
// replay is reported interrupted (the harness's reaper, as any replica's
// would, once the 2 s lease lapsed), and the rest is previewed and replayed
// again, as an operator would. At the end nothing may be lost, and every
// delivery — duplicates included — must be listed in a replay's ledger.
func TestChaosSIGKILL(t *testing.T) {
	gate(t)
	const n, kills = 1000, 20
	rng := rand.New(rand.NewPCG(seed(t), 1))
	points := sortedPoints(rng.IntN, kills, n)
	f := newFixture(t, n, "", nil)
	began := time.Now()
	var replays, at []string
	states := map[engine.State]int{}
	for done := 0; done < kills; {
		p := f.preview(t)
		if p.Token == "" {
			t.Fatalf("nothing left to replay after %d kills", done)
		}
		pr := start(t, f.env, "replay", p.Token, "step=1000", "cap=1000", "rate=400", "timeout=20s")
		id := f.replayOf(t, p.Token, pr)
		if id == "" {
			continue // refused (the DLQ changed under the preview): preview again
		}
		replays = append(replays, id)
		target := max(points[done], f.total()+1)
		reached := false
		deadline := time.Now().Add(time.Minute)
		for !reached && !pr.Exited() && time.Now().Before(deadline) {
			reached = f.total() >= target
			if !reached {
				time.Sleep(5 * time.Millisecond) // polling interval
			}
		}
		if !reached {
			t.Fatalf("replay %s never reached %d deliveries (at %d):\n%s", id, target, f.total(), pr.Output())
		}
		pr.Kill()
		done++
		killedAt := f.total()
		r := f.reap(t, id)
		states[r.State]++
		at = append(at, fmt.Sprintf("%d", killedAt))
		f.settled(t)
	}
	replays = append(replays, f.finish(t)...)
	a := f.accountFor(t, replays)
	took := time.Since(began).Round(time.Second)
	if len(a.Lost) > 0 {
		t.Errorf("lost %d: %v", len(a.Lost), a.Lost)
	}
	if a.InDLQ > 0 {
		t.Errorf("%d messages left in the DLQ after the finishing replays", a.InDLQ)
	}
	if a.Unaccounted > 0 || a.DupUnrecorded > 0 {
		t.Errorf("%d deliveries and %d duplicates are not listed in any ledger", a.Unaccounted, a.DupUnrecorded)
	}
	var st []string
	for s, c := range states {
		st = append(st, fmt.Sprintf("%d %s", c, s))
	}
	figure(t, "sigkill", "%d SIGKILLs of the replaying process (at deliveries %s; reported %s) over %d replays in %s — %s",
		kills, strings.Join(at, ","), strings.Join(st, ", "), len(replays), took, a)
}
