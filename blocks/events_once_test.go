package blocks

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// counted finds a count of a glossary quantity in a line: "12 came back",
// "30 of 1,000 messages sent", "*3 messages MISSING*".
var counted = regexp.MustCompile(`(?i)\d[\d,]*(?: of \d[\d,]*)?(?: messages?)?\*? (sent|settled|came back|seen back|missing|not delivered)\b`)

// TestEventLinesSayEachCountOnce: a thread reply and an activity line
// each give every quantity of a replay's life (sent, settled, came back,
// missing, not delivered) at most once, through a start, a step, a stop,
// a pause, a resume, a cancellation, a finish with messages missing, an
// interruption and a window the tap missed.
func TestEventLinesSayEachCountOnce(t *testing.T) {
	events := append(lifecycleEvents(), unseenEvents()...)
	for _, e := range events {
		for kind, l := range map[string]string{"reply": StepReply(e), "activity line": Activity(e)} {
			seen := map[string]int{}
			for _, m := range counted.FindAllStringSubmatch(l, -1) {
				seen[strings.ToLower(m[1])]++
			}
			for q, n := range seen {
				if n > 1 {
					t.Errorf("%s's %s gives %q %d times: %s", e.Kind, kind, q, n, l)
				}
			}
		}
	}
}

// TestStepReplyKeepsWhatElseWasObserved: a step's reply leaves out the
// clauses of the engine's observation that restate its counts and keeps
// the others.
func TestStepReplyKeepsWhatElseWasObserved(t *testing.T) {
	st := lastStep()
	st.Observation = "all 20 settled; none seen back in orders.dlq; the target's counters show every copy delivered and acked"
	got := StepReply(engine.Event{Kind: engine.EventStepPassed, Replay: replay(engine.StateRunning), Step: st})
	want := ":white_check_mark: Step 2 passed in 4.2s — 20 sent, 20 settled, 0 came back: the target's counters show every copy delivered and acked."
	if got != want {
		t.Errorf("step reply\n %q\nwant\n %q", got, want)
	}
}
