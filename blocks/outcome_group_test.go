package blocks

import (
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// TestStopLineNamesTheTopGroup holds the stop's outcome line to the
// issue's form, "3 of 10 came back — <type> (group <id>)": the id of the
// group most returned copies are in, the one check shows them under.
func TestStopLineNamesTheTopGroup(t *testing.T) {
	back := func(reason, group string) engine.Failure {
		return engine.Failure{ID: "c", Kind: engine.FailureReturned, Reason: reason, GroupID: group}
	}
	stopped := func(fs ...engine.Failure) engine.Replay {
		r := replay(engine.StateStopped)
		r.Sent, r.Settled, r.Returned, r.Step, r.Failures = 10, 10, len(fs), 1, fs
		r.Failures = append(r.Failures, engine.Failure{ID: "u", Kind: engine.FailureUnroutable, Reason: "NO_ROUTE"})
		return r
	}
	for _, c := range []struct {
		name string
		r    engine.Replay
		want string
	}{
		{"one group", stopped(back("rejected", "g3f2a00000001"), back("rejected", "g3f2a00000001"), back("rejected", "g3f2a00000001")),
			"3 of 10 came back — rejected (group `g3f2a00000001`) · replay"},
		{"a top group", stopped(back("expired", "g000000000002"), back("rejected", "g3f2a00000001"), back("rejected", "g3f2a00000001")),
			"3 of 10 came back — rejected (group `g3f2a00000001`; 1 other group came back too) · replay"},
		{"no top group", stopped(back("expired", "g000000000002"), back("rejected", "g3f2a00000001")),
			"2 of 10 came back — expired · replay"},
		{"no group known", stopped(back("rejected", "")),
			"1 of 10 came back — rejected · replay"},
	} {
		if got := Outcome(c.r); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q\nwant it to hold %q", c.name, got, c.want)
		}
	}
}
