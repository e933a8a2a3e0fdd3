package commands

import (
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// TestCheckReplayParams: a program's replay parameters are checked as
// typed values with the grammar's rules: step and cap at least 1, the cap
// at least the step, rate and timeout in range; absent values are the
// defaults.
func TestCheckReplayParams(t *testing.T) {
	n := func(v int) *int { return &v }
	ok := []struct {
		in   ReplayParams
		want engine.Params
	}{
		{ReplayParams{}, engine.Params{}},
		{ReplayParams{Step: n(1), Cap: n(1)}, engine.Params{Step: 1, Cap: 1}},
		{ReplayParams{Step: n(5), Rate: "max", Timeout: "30s"}, engine.Params{Step: 5, Rate: -1, Timeout: 30 * time.Second}},
		{ReplayParams{Rate: "2.5"}, engine.Params{Rate: 2.5}},
	}
	for _, c := range ok {
		got, msg := CheckReplayParams(c.in)
		if msg != "" || got != c.want {
			t.Errorf("%+v: %+v %q, want %+v", c.in, got, msg, c.want)
		}
	}
	for _, c := range []struct {
		in   ReplayParams
		want string
	}{
		{ReplayParams{Step: n(0)}, "`step=0` must be at least 1"},
		{ReplayParams{Cap: n(0)}, "`cap=0` must be at least 1"},
		{ReplayParams{Step: n(-3)}, "at least 1"},
		{ReplayParams{Step: n(2_000_000_000)}, "too large"},
		{ReplayParams{Step: n(20), Cap: n(10)}, "below `step=20`"},
		{ReplayParams{Cap: n(5)}, "below the default first step"},
		{ReplayParams{Rate: "fast"}, "not a number"},
		{ReplayParams{Timeout: "1h1m1s1ms", Rate: "0"}, "out of range"},
		{ReplayParams{Timeout: "forever"}, "not a duration"},
	} {
		if _, msg := CheckReplayParams(c.in); !strings.Contains(msg, c.want) {
			t.Errorf("%+v: %q, want %q", c.in, msg, c.want)
		}
	}
}
