package commands

import (
	"strings"
	"testing"
)

func TestHelpFull(t *testing.T) {
	off := Help("", false)
	if !strings.Contains(off, "Access control is off: anyone in the workspace can preview and replay.") {
		t.Errorf("help without a permissions file does not say access control is off:\n%s", off)
	}
	on := Help("", true)
	if !strings.Contains(on, "Access control is on") || strings.Contains(on, "Access control is off") {
		t.Errorf("help with a permissions file does not say access control is on:\n%s", on)
	}
	for _, v := range verbs {
		if !strings.Contains(off, "`/dlq "+v) {
			t.Errorf("full help lacks the %s command", v)
		}
	}
	for _, k := range append(append([]string{}, previewKeys...), replayKeys...) {
		if !strings.Contains(off, "`"+k+"=") || !strings.Contains(off, "Example: `"+examples[k]) {
			t.Errorf("full help lacks %s= or its example", k)
		}
	}
	// Every example in the help parses.
	for _, line := range strings.Split(off, "\n") {
		_, ex, ok := strings.Cut(line, "Example: `/dlq ")
		if !ok {
			continue
		}
		ex = strings.NewReplacer("<token>", "tok1234", "<replay>", "r-1234", "`", "").Replace(ex)
		if r := Parse(ex, now); r.Cmd == nil {
			t.Errorf("help example %q does not parse: %s", ex, r.Reply)
		}
	}
}

func TestHelpTopics(t *testing.T) {
	for _, topic := range helpTopics() {
		h := Help(topic, false)
		if strings.Contains(h, "There is no help") || !strings.Contains(h, "Example") && topic != "permissions" {
			t.Errorf("Help(%q) = %q", topic, h)
		}
		if len(h) > len(Help("", false))/2 {
			t.Errorf("Help(%q) is not short (%d bytes)", topic, len(h))
		}
		// Every topic Parse accepts renders.
		r := Parse("help "+topic, now)
		if c, ok := r.Cmd.(HelpCmd); !ok || c.Topic != topic {
			t.Errorf("Parse(help %s) = %#v", topic, r)
		}
	}
	if h := Help("preview", false); !strings.Contains(h, "/dlq preview <dlq>") || !strings.Contains(h, "reason=") {
		t.Errorf("Help(preview) = %q", h)
	}
	if h := Help("reason", false); !strings.Contains(h, "delivery_limit") || !strings.Contains(h, "/dlq preview orders.dlq reason=rejected") {
		t.Errorf("Help(reason) = %q", h)
	}
	if h := Help("permissions", true); !strings.Contains(h, "`publish`") {
		t.Errorf("Help(permissions) = %q", h)
	}
	if h := Help("nonsense", false); !strings.HasPrefix(h, "There is no help on `nonsense`") || !strings.Contains(h, "/dlq check") {
		t.Errorf("Help(nonsense) = %q", h)
	}
}

func TestHelpTerminal(t *testing.T) {
	h := HelpAs(TerminalPrefix, "", false)
	if strings.Contains(h, "`") || strings.Contains(h, "*Commands*") || strings.Contains(h, "/dlq") {
		t.Errorf("terminal help keeps Slack markup:\n%s", h)
	}
	if !strings.Contains(h, "dlqbot preview <dlq>") || !strings.Contains(h, "--json") {
		t.Errorf("terminal help lacks its commands or --json:\n%s", h)
	}
}
