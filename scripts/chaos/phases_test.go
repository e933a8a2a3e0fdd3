package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// phase is a moment of a replay in which a pause or cancel is requested.
type phase struct {
	name string
	args []string // replay parameters
	// ready reports, from the record and the target's deliveries, that the
	// replay is in the phase.
	ready func(r engine.Replay, delivered int) bool
}

// phases are the three moments of issue 12: while a step sends, while it
// settles, and between two steps.
var phases = []phase{
	// 1,000 at 20/s in one step: it sends for 10 s.
	{"sending", []string{"step=1000", "cap=1000", "rate=20", "timeout=20s"}, func(r engine.Replay, d int) bool {
		return r.Step == 1 && d >= 20
	}},
	// Step 1 (10 copies, unpaced) is delivered at once, then waits a grace
	// period of 3 s with no return before it passes: settling.
	{"settling", []string{"step=10", "cap=500", "rate=max", "timeout=20s"}, func(r engine.Replay, d int) bool {
		return r.Step == 1 && d >= 10
	}},
	// Step 1's settled count is written when it has settled, just before
	// the next step starts: the request lands between steps (or at the
	// very start of step 2).
	{"between steps", []string{"step=10", "cap=500", "rate=max", "timeout=20s"}, func(r engine.Replay, d int) bool {
		return r.Settled >= 10
	}},
}

// TestChaosControlEveryPhase requests a pause, then (on a new replay) a
// cancel, with `dlqbot pause|cancel <replay>` while a `dlqbot replay` is in
// each phase (sending, settling, between steps), and checks that the
// request acts within 1 s (the state reaches paused or cancelled; no new
// delivery to the target 1 s after the request), that the final state is
// the one asked for, and that the unsent messages are still in the DLQ.
// It runs on RabbitMQ 3.10 with a classic DLQ and on 4.0 with a quorum one.
func TestChaosControlEveryPhase(t *testing.T) {
	gate(t)
	eachTarget(t, controlEveryPhase)
}

func controlEveryPhase(t *testing.T, tg target) {
	const n, limit = 1000, time.Second
	var lines []string
	worst := time.Duration(0)
	for _, ph := range phases {
		for _, verb := range []string{"pause", "cancel"} {
			want := engine.StatePaused
			if verb == "cancel" {
				want = engine.StateCancelled
			}
			t.Run(strings.ReplaceAll(ph.name, " ", "_")+"/"+verb, func(t *testing.T) {
				f := newFixtureOn(t, tg, n, "", nil)
				p := f.preview(t)
				follower := start(t, f.env, append(append([]string{"replay", p.Token}, ph.args...), "--json")...)
				id := f.replayOf(t, p.Token, follower)
				if id == "" {
					t.Fatal("the replay was not approved")
				}
				var at engine.Replay
				testkit.Eventually(t, time.Minute, "the replay "+ph.name, func() bool {
					at = f.state(id)
					if at.State.Terminal() {
						t.Fatalf("the replay ended (%s) before it was %s", at.State, ph.name)
					}
					return at.State == engine.StateRunning && ph.ready(at, f.total())
				})
				dAt, asked := f.total(), time.Now()
				out, errOut, code := cli(t, f.env, verb, id, "--json")
				recorded := time.Now()
				if code != 0 {
					t.Fatalf("dlqbot %s: exit %d\n%s\n%s", verb, code, out, errOut)
				}
				// Acted: the state reached the one asked for.
				var r engine.Replay
				for {
					r = f.state(id)
					if r.State != engine.StateRunning || time.Since(recorded) > 30*time.Second {
						break
					}
					time.Sleep(10 * time.Millisecond) // polling interval
				}
				acted := time.Since(recorded)
				if r.State != want {
					t.Errorf("%s during %s: the replay is %s (%s), want %s", verb, ph.name, r.State, r.Note, want)
				}
				if acted > limit {
					t.Errorf("%s during %s: the state became %s %s after the request was recorded (limit %s)", verb, ph.name, r.State, acted.Round(time.Millisecond), limit)
				}
				if acted > worst {
					worst = acted
				}
				// Deliveries stop: none later than 1 s after the request.
				time.Sleep(time.Until(recorded.Add(limit)))
				atLimit := f.total()
				// Wait out a step's grace and a control poll: nothing may
				// arrive, and nothing may override the state asked for.
				time.Sleep(4 * time.Second)
				late := f.total() - atLimit
				if late > 0 {
					t.Errorf("%s during %s: %d deliveries arrived later than %s after the request", verb, ph.name, late, limit)
				}
				final := f.state(id)
				if final.State != want {
					t.Errorf("%s during %s: the replay is %s (%s) 5 s later, want %s", verb, ph.name, final.State, final.Note, want)
				}
				// Unsent messages are still in the DLQ.
				f.settled(t)
				delivered := len(f.delivered())
				inDLQ := f.rabbit.Count(f.dlq)
				if delivered+inDLQ != n {
					t.Errorf("%s during %s: %d delivered + %d in the DLQ != %d", verb, ph.name, delivered, inDLQ, n)
				}
				a := f.accountFor(t, []string{id})
				if len(a.Lost) > 0 || a.Unaccounted > 0 || a.DupUnrecorded > 0 {
					t.Errorf("%s during %s: %s", verb, ph.name, a)
				}
				line := fmt.Sprintf("%s during %s (asked at step %d, sent %d, %d delivered): %s %s after the request was recorded (the command took %s), %d delivered later than 1 s, %s 5 s later, %d delivered, %d in the DLQ",
					verb, ph.name, at.Step, at.Sent, dAt, r.State, acted.Round(time.Millisecond), recorded.Sub(asked).Round(time.Millisecond), late, final.State, delivered, inDLQ)
				t.Log(line)
				lines = append(lines, line)
			})
		}
	}
	figure(t, tg.figureName("control_phases"), "%s: pause and cancel with `dlqbot pause|cancel <replay>` in each phase of a %d-message replay (slowest act: %s): %s", tg.name, n, worst.Round(time.Millisecond), strings.Join(lines, "; "))
}
