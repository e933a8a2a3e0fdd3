package commands

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse checks Parse's contract on any text: it never panics, sets
// exactly one of Cmd and Reply, and the canonical form of a command parses
// back to the same command.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"",
		"help",
		"help preview",
		"help reason=",
		"list",
		"preview orders.dlq",
		"preview orders.dlq reason=rejected",
		"preview orders.dlq reason=rejected since=2h until=30m limit=10",
		`preview orders.dlq exception="timeout while" source=orders`,
		`preview orders.dlq exception=“smart quotes”`,
		`preview q exception="esc \" \\ \t \x41"`,
		"preview orders.dlq ids=3f2a9c1b7e4d5a60,9B8C7D6E5F4A3B2C",
		"preview orders.dlq park_after=5 include_parked=true vhost=/ to=scratch",
		"preview orders.dlq since=2024-05-01T12:00:00+02:00 until=2024-05-02",
		"preview orders.dlq since=1d12h",
		"preview orders.dlq resaon=rejected",
		"preview orders.dlq exception=timeout while",
		`preview orders.dlq exception="unterminated`,
		"preview orders.dlq limit=0",
		"preview orders.dlq since=2h until=3h",
		"preview a b",
		"preview --json orders.dlq",
		"replay tok_ABCDEFGH12345678",
		"replay tok_ABCD step=5 cap=200 rate=20 timeout=2m",
		"replay tok_ABCD rate=max",
		"replay tok_ABCD step=20 cap=10",
		"replay orders.dlq",
		"status",
		"status r-1234",
		"pause r-1234",
		"resume r-1234",
		"cancel r-1234",
		"check r-1234",
		"stop r-1234",
		"=",
		`"`,
		"preview \x00",
		"preview q to=q",
		`preview q group="order <n> not found" replayed_by=r_0123456789abcdef`,
		"preview q group=g3f2a9c1b7e4d",
		`preview q group="a=b \"c\""`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		r := Parse(text, now)
		if (r.Cmd == nil) == (r.Reply == "") {
			t.Fatalf("Parse(%q) = %#v: want exactly one of Cmd and Reply", text, r)
		}
		if !utf8.ValidString(r.Reply) {
			t.Fatalf("Parse(%q): reply is not UTF-8: %q", text, r.Reply)
		}
		if r.Cmd != nil {
			canon := r.Cmd.String()
			again := Parse(canon, now)
			if !reflect.DeepEqual(again.Cmd, r.Cmd) {
				t.Fatalf("Parse(%q) = %#v\ncanonical %q parses to %#v (reply %q)", text, r.Cmd, canon, again.Cmd, again.Reply)
			}
			if again.Cmd.String() != canon {
				t.Fatalf("canonical form is not stable: %q then %q", canon, again.Cmd.String())
			}
		}
		rr, _ := ParseArgs(strings.Fields(text), now)
		if (rr.Cmd == nil) == (rr.Reply == "") {
			t.Fatalf("ParseArgs(%q) = %#v: want exactly one of Cmd and Reply", text, rr)
		}
	})
}
