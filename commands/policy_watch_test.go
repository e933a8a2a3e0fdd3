package commands

import (
	"strings"
	"testing"
	"time"
)

const watchRoles = `
roles:
  - name: sre
    users: [U012ABCDEF]
    grants:
      - queues: ["*"]
        actions: [read]
`

func TestParseWatch(t *testing.T) {
	p := mustPolicy(t, watchRoles+`
watch:
  - queues: ["orders.*.dlq"]
    channel: C0INCIDENT
    threshold: 25
    within: 2m
  - queues: ["*.dlq"]
    channel: C0OPS
`)
	if len(p.Watch) != 2 {
		t.Fatalf("watch = %+v", p.Watch)
	}
	if w := p.Watch[0]; w.Channel != "C0INCIDENT" || w.Threshold != 25 || w.Within != 2*time.Minute {
		t.Errorf("first rule = %+v", w)
	}
	if w := p.Watch[1]; w.Threshold != DefaultWatchThreshold || w.Within != DefaultWatchWithin {
		t.Errorf("defaults = %+v, want 10 in 5m", w)
	}
	if w, ok := p.WatchFor("orders.eu.dlq"); !ok || w.Channel != "C0INCIDENT" {
		t.Errorf("WatchFor(orders.eu.dlq) = %+v %v, want the first rule", w, ok)
	}
	if w, ok := p.WatchFor("billing.dlq"); !ok || w.Channel != "C0OPS" {
		t.Errorf("WatchFor(billing.dlq) = %+v %v", w, ok)
	}
	if _, ok := p.WatchFor("orders"); ok {
		t.Error("orders is watched; no rule matches it")
	}
}

func TestParseWatchRefusals(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"watch:\n  - channel: C0OPS\n", "names no queues"},
		{"watch:\n  - queues: [a.dlq]\n", "names no channel"},
		{"watch:\n  - queues: [a.dlq]\n    channel: '#ops'\n", "not a Slack channel id"},
		{"watch:\n  - queues: [a.dlq]\n    channel: C0OPS\n    threshold: 0\n", "threshold must be"},
		{"watch:\n  - queues: [a.dlq]\n    channel: C0OPS\n    threshold: ten\n", "threshold must be"},
		{"watch:\n  - queues: [a.dlq]\n    channel: C0OPS\n    within: 1s\n", "within must be"},
		{"watch:\n  - queues: [a.dlq]\n    channel: C0OPS\n    every: 1m\n", "unknown key"},
		{"watch:\n  - queues: ['a[b]']\n    channel: C0OPS\n", "only * and ? are wildcards"},
	} {
		_, err := ParsePolicy([]byte(watchRoles + c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "line ") {
			t.Errorf("%q: err = %v, want one naming the line and %q", c.yaml, err, c.want)
		}
	}
}
