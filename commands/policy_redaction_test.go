package commands

import (
	"errors"
	"strings"
	"testing"
)

const redactionPolicy = `
roles:
  - name: sre
    users: [U012ABCDEF]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
redaction:
  excerpt_bytes: 0
  headers: [X-Card, x-exception-message]
  json_paths: [$.card.number, "$.items[*].email"]
channels:
  - queues: ["payments.*"]
    allow: [C0PAYMENTS]
`

func TestPolicyRedaction(t *testing.T) {
	p := mustPolicy(t, redactionPolicy)
	if n, ok := p.ExcerptBytes(); !ok || n != 0 {
		t.Errorf("excerpt_bytes = %d, %v; want 0 (none)", n, ok)
	}
	hidden := p.HiddenHeaders("orders.dlq", map[string]any{"x-card": "4111111111111111", "x-exception-message": "card 4111 declined", "x-other": "kept"})
	if strings.Join(hidden, "|") != "4111111111111111|card 4111 declined" && strings.Join(hidden, "|") != "card 4111 declined|4111111111111111" {
		t.Errorf("hidden headers %q", hidden)
	}
	out, vals, ok := p.RedactBody("orders.dlq", []byte(`{"card":{"number":"4111111111111111"},"items":[{"email":"a@b.example"}],"id":7}`))
	if !ok || strings.Contains(string(out), "4111") || strings.Contains(string(out), "a@b.example") || !strings.Contains(string(out), `"id":7`) || len(vals) != 2 {
		t.Errorf("body %s, hidden %q, ok %v", out, vals, ok)
	}
	if out, _, ok := p.RedactBody("orders.dlq", []byte("card=4111")); ok || out != nil {
		t.Errorf("a body that is not JSON was shown: %q", out)
	}
	var ce *ChannelError
	if err := p.CheckChannel("payments.dlq", "C0OTHER"); !errors.As(err, &ce) || !errors.Is(err, ErrChannelNotAllowed) || !strings.Contains(err.Error(), "`C0PAYMENTS`") {
		t.Errorf("payments.dlq in C0OTHER: %v", err)
	}
	for dlq, ch := range map[string]string{"payments.dlq": "C0PAYMENTS", "orders.dlq": "C0OTHER"} {
		if err := p.CheckChannel(dlq, ch); err != nil {
			t.Errorf("%s in %s: %v", dlq, ch, err)
		}
	}
	var none *Policy
	if err := none.CheckChannel("payments.dlq", "C0OTHER"); err != nil || none.HiddenHeaders("q", map[string]any{"x-card": "1"}) != nil {
		t.Errorf("without a policy: %v", err)
	}
}

func TestPolicyRedactionInvalid(t *testing.T) {
	base := "roles:\n  - name: r\n    users: [U012ABCDEF]\n    grants:\n      - queues: [\"*\"]\n        actions: [read]\n"
	for yaml, want := range map[string]string{
		"redaction:\n  excerpt_bytes: -1\n":                        "excerpt_bytes",
		"redaction:\n  excerpt_bytes: lots\n":                      "excerpt_bytes",
		"redaction:\n  json_paths: [card.number]\n":                "must start with $",
		"redaction:\n  json_paths: [\"$.a[x]\"]\n":                 "neither an index",
		"redaction:\n  headers: [\"\"]\n":                          "empty",
		"redaction:\n  fields: [a]\n":                              "fields",
		"channels:\n  - queues: [\"p.*\"]\n    allow: [general]\n": "channel id",
		"channels:\n  - queues: [\"p.*\"]\n":                       "allows no channel",
		"channels:\n  - allow: [C0PAY]\n":                          "names no queues",
	} {
		_, err := ParsePolicy([]byte(base + yaml))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "line ") {
			t.Errorf("%q: %v, want an error naming the line and %q", yaml, err, want)
		}
	}
}
