package blocks

import (
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// A step that is not double the last says why: the cap, what was left, or
// the first copies of the classes it reached; a plain doubling says nothing.
func TestStepSaysWhyItIsNotDouble(t *testing.T) {
	p := engine.Params{Step: 10, Cap: 30}
	for _, c := range []struct {
		st   engine.StepResult
		want string
	}{
		{engine.StepResult{Step: 2, Planned: 20}, ""},
		{engine.StepResult{Step: 3, Planned: 30}, "capped at cap=30"},
		{engine.StepResult{Step: 3, Planned: 4}, "4, not 30: only that many were left"},
		{engine.StepResult{Step: 1, Planned: 16}, "16, not 10: one more for each target and failure group"},
	} {
		got := sizeWhy(p, c.st)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("step %d of %d: %q, want %q", c.st.Step, c.st.Planned, got, c.want)
		}
		line := StepReplyAs("/dlq", engine.Event{Kind: engine.EventStepPassed, Step: &c.st, Replay: engine.Replay{Params: p}})
		if !strings.Contains(line, c.want) {
			t.Errorf("step line %q lacks %q", line, c.want)
		}
	}
}

// People in an outcome appear as Slack mentions.
func TestOutcomeMentionsWhoActed(t *testing.T) {
	r := replay(engine.StateCancelled)
	r.Note = "cancelled by " + approver
	if got := Outcome(r); !strings.Contains(got, "*Cancelled* by <@"+approver+">") {
		t.Errorf("outcome %q does not mention who cancelled", got)
	}
	r.State, r.Note = engine.StatePaused, "paused by an operator"
	if got := Outcome(r); strings.Contains(got, " by ") {
		t.Errorf("outcome %q names an unknown operator", got)
	}
}
