package commands

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args  []string
		want  Command
		flags Flags
	}{
		{nil, HelpCmd{}, Flags{}},
		{[]string{"preview", "orders.dlq", "reason=rejected"}, sel("orders.dlq", func(s *engine.Selection) { s.Reason = "rejected" }), Flags{}},
		{[]string{"--json", "preview", "orders.dlq"}, sel("orders.dlq", nil), Flags{JSON: true}},
		{[]string{"preview", "--json", "orders.dlq"}, sel("orders.dlq", nil), Flags{JSON: true}},
		{[]string{"preview", "orders.dlq", "-json"}, sel("orders.dlq", nil), Flags{JSON: true}},
		{[]string{"preview", "orders.dlq", "--details"}, sel("orders.dlq", nil), Flags{Details: true}},
		{[]string{"/usr/local/bin/dlqbot", "status", "--json"}, StatusCmd{}, Flags{JSON: true}},
		{[]string{"preview", "q", "exception=timeout while"}, sel("q", func(s *engine.Selection) { s.Exception = "timeout while" }), Flags{}},
		{[]string{"preview", "q", `exception="timeout while"`}, sel("q", func(s *engine.Selection) { s.Exception = "timeout while" }), Flags{}},
		{[]string{"preview", "q", "exception=say \"hi\""}, sel("q", func(s *engine.Selection) { s.Exception = `say "hi"` }), Flags{}},
		{[]string{"preview", "--", "--odd-queue"}, sel("--odd-queue", nil), Flags{}},
		{[]string{"preview", "--json", "--", "-q", "--json"}, nil, Flags{JSON: true}},
		{[]string{"preview", "--help"}, HelpCmd{Topic: "preview"}, Flags{Help: true}},
		{[]string{"-h"}, HelpCmd{}, Flags{Help: true}},
		{[]string{"help", "replay", "--help"}, HelpCmd{Topic: "replay"}, Flags{Help: true}},
		{[]string{"--help", "preview", "reason=x"}, HelpCmd{Topic: "preview"}, Flags{Help: true}},
		{[]string{"bogus", "--help", "--json"}, HelpCmd{}, Flags{Help: true, JSON: true}},
		{[]string{"replay", "abcd", "rate=max", "--json"}, ReplayCmd{Token: "abcd", Params: engine.Params{Rate: -1}}, Flags{JSON: true}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r, f := ParseArgs(tt.args, now)
			if f != tt.flags {
				t.Errorf("flags = %+v, want %+v", f, tt.flags)
			}
			if tt.want == nil {
				if r.Cmd != nil || r.Reply == "" {
					t.Fatalf("got %#v, want a reply", r)
				}
				return
			}
			if !reflect.DeepEqual(r.Cmd, tt.want) {
				t.Fatalf("got %#v (reply %q), want %#v", r.Cmd, r.Reply, tt.want)
			}
		})
	}
}

func TestParseArgsReplies(t *testing.T) {
	tests := []struct {
		args     []string
		mentions []string
		json     bool
	}{
		{[]string{"preview", "q", "--loud", "--json"}, []string{"`--loud`", "--verbose"}, true},
		{[]string{"previw", "q"}, []string{"`previw`", "Try: dlqbot help"}, false},
		{[]string{"preview", "q", "resaon=x", "--json"}, []string{"`resaon=`", "Try: dlqbot preview q reason=x"}, true},
		{[]string{"preview", "q", "limit=\xff"}, []string{"UTF-8"}, false},
		{[]string{"preview", "q r"}, []string{"q r", "white space"}, false},
	}
	for _, tt := range tests {
		r, f := ParseArgs(tt.args, now)
		if r.Cmd != nil || r.Reply == "" {
			t.Fatalf("%q: got %#v, want a reply", tt.args, r)
		}
		if f.JSON != tt.json {
			t.Errorf("%q: JSON = %v, want %v", tt.args, f.JSON, tt.json)
		}
		for _, m := range tt.mentions {
			if !strings.Contains(r.Reply, m) {
				t.Errorf("%q: reply %q does not mention %q", tt.args, r.Reply, m)
			}
		}
	}
}

// The canonical form of a command, split on spaces the way a shell would
// split it after unquoting, parses back to the same command.
func TestParseArgsMatchesParse(t *testing.T) {
	for _, line := range []string{
		"preview orders.dlq reason=rejected since=2h limit=10",
		"replay abcd step=5 cap=50 rate=2.5 timeout=30s",
		"check r-1234",
	} {
		a := Parse(line, now)
		b, _ := ParseArgs(strings.Fields(line), now)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%q: Parse %#v, ParseArgs %#v", line, a, b)
		}
	}
}

// TestVerboseAnywhere: --verbose (or -v) is taken out wherever it stands,
// as --json is.
func TestVerboseAnywhere(t *testing.T) {
	for _, args := range [][]string{
		{"--verbose", "status"}, {"status", "--verbose"}, {"status", "-v", "--json"},
	} {
		r, f := ParseArgs(args, now)
		if r.Reply != "" || !f.Verbose {
			t.Errorf("%q: reply %q, verbose %v", args, r.Reply, f.Verbose)
		}
	}
}

// TestTerminalHelpSpeaksOfCommands: the terminal's help, whole and per
// topic, names commands, never Slack's buttons or clicks, and mentions
// --verbose.
func TestTerminalHelpSpeaksOfCommands(t *testing.T) {
	full := HelpAs(TerminalPrefix, "", true)
	if !strings.Contains(full, "--verbose") || !strings.Contains(full, "dlqbot list") {
		t.Errorf("the terminal's help names neither --verbose nor list:\n%s", full)
	}
	for _, topic := range append([]string{""}, helpTopics()...) {
		h := strings.ToLower(HelpAs(TerminalPrefix, topic, true))
		for _, slackWord := range []string{"button", "click"} {
			if strings.Contains(h, slackWord) {
				t.Errorf("help %q at the terminal speaks of a %s:\n%s", topic, slackWord, h)
			}
		}
	}
	if !strings.Contains(HelpAs(DefaultPrefix, "replay", true), "Approve button") {
		t.Error("Slack's help on replay no longer names the Approve button")
	}
}
