package commands

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// TestParseGroupAndReplayedBy checks the group= and replayed_by= filters:
// parsed exactly, rendered canonically, and read back the same (a group
// button's value is a selection's String).
func TestParseGroupAndReplayedBy(t *testing.T) {
	for _, c := range []struct {
		in   string
		want PreviewCmd
	}{
		{`preview orders.dlq group="order <n> not found"`, sel("orders.dlq", func(s *engine.Selection) { s.Group = "order <n> not found" })},
		{`preview orders.dlq group=g3f2a9c1b7e4d reason=exception`, sel("orders.dlq", func(s *engine.Selection) {
			s.Group, s.Reason = "g3f2a9c1b7e4d", engine.ReasonException
		})},
		{`preview orders.dlq replayed_by=r_0123456789abcdef group=rejected`, sel("orders.dlq", func(s *engine.Selection) {
			s.ReplayedBy, s.Group = "r_0123456789abcdef", "rejected"
		})},
		{`preview orders.dlq group="say \"hi\" = <n>"`, sel("orders.dlq", func(s *engine.Selection) { s.Group = `say "hi" = <n>` })},
	} {
		res := Parse(c.in, now)
		if res.Cmd == nil {
			t.Fatalf("%s: %s", c.in, res.Reply)
		}
		if !reflect.DeepEqual(res.Cmd, c.want) {
			t.Fatalf("%s: got %#v, want %#v", c.in, res.Cmd, c.want)
		}
		back := Parse(res.Cmd.String(), now)
		if !reflect.DeepEqual(back.Cmd, res.Cmd) {
			t.Fatalf("%s: %q reads back as %#v (%s)", c.in, res.Cmd.String(), back.Cmd, back.Reply)
		}
	}
	for _, bad := range []string{
		"preview orders.dlq replayed_by=orders.created",
		"preview orders.dlq group=" + strings.Repeat("x", 201),
		"preview orders.dlq group=",
	} {
		if res := Parse(bad, now); res.Cmd != nil || res.Reply == "" {
			t.Errorf("%s: accepted as %v", bad, res.Cmd)
		}
	}
	if h := Help("group", false); !strings.Contains(h, "group=") || !strings.Contains(h, "exactly") {
		t.Errorf("help group: %s", h)
	}
}
