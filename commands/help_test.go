package commands

import (
	"slices"
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
	// The overview is short: one line a command, the topics behind it.
	if n := strings.Count(off, "\n") + 1; n > 10 {
		t.Errorf("full help is %d lines, want at most 10:\n%s", n, off)
	}
	for _, topic := range []string{"help filters", "help params", "help glossary", "help permissions"} {
		if !strings.Contains(off, "/dlq "+topic) {
			t.Errorf("full help does not point to %s", topic)
		}
	}
	// Every filter, parameter and its example is behind a topic.
	filters, params := Help("filters", false), Help("params", false)
	for _, k := range append(append([]string{}, previewKeys...), replayKeys...) {
		h := filters + params
		if !strings.Contains(h, "`"+k+"=") || !strings.Contains(h, "Example: `"+examples[k]) {
			t.Errorf("help filters/params lacks %s= or its example", k)
		}
	}
	// Every example in the help parses.
	for _, line := range strings.Split(off+"\n"+filters+"\n"+params, "\n") {
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
		term := slices.Contains(glossaryTopics(), topic) || topic == "glossary"
		if strings.Contains(h, "There is no help") || !strings.Contains(h, "Example") && topic != "permissions" && !term {
			t.Errorf("Help(%q) = %q", topic, h)
		}
		if len(h) > 2000 {
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

// Every term of the glossary has its own help, by its name in one or more
// words and by its other names, and the glossary lists them all.
func TestHelpGlossary(t *testing.T) {
	all := Help("glossary", false)
	for _, g := range Glossary {
		if !strings.Contains(all, "*"+g.Name+"*: "+g.Meaning) {
			t.Errorf("help glossary lacks %q", g.Name)
		}
		for _, line := range []string{"help " + g.Name, "help " + termTopic(g.Name)} {
			r := Parse(line, now)
			c, ok := r.Cmd.(HelpCmd)
			if !ok {
				t.Errorf("Parse(%q) = %#v", line, r)
				continue
			}
			if h := Help(c.Topic, false); !strings.Contains(h, g.Meaning) {
				t.Errorf("%s answers %q", line, h)
			}
		}
	}
	for word, want := range map[string]string{"tap": "tap", "returned": "came back", "settle": "settled", "in-doubt": "in doubt"} {
		r := Parse("help "+word, now)
		if c, ok := r.Cmd.(HelpCmd); !ok || !strings.Contains(Help(c.Topic, false), "*"+want+"*") {
			t.Errorf("help %s = %#v", word, r)
		}
	}
	if h := HelpAs(TerminalPrefix, "glossary", false); !strings.Contains(h, "came back") || strings.Contains(h, "*") {
		t.Errorf("terminal glossary:\n%s", h)
	}
}
