package commands

import (
	"errors"
	"slices"
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
		"redaction:\n  excerpt_bytes: -1\n":                           "excerpt_bytes",
		"redaction:\n  excerpt_bytes: lots\n":                         "excerpt_bytes",
		"redaction:\n  json_paths: [card.number]\n":                   "must start with $",
		"redaction:\n  json_paths: [\"$.a[x]\"]\n":                    "neither an index",
		"redaction:\n  headers: [\"\"]\n":                             "empty",
		"redaction:\n  fields: [a]\n":                                 "fields",
		"redaction:\n  show_header: [x-tenant]\n":                     `did you mean "show_headers"`,
		"redaction:\n  show_headers: []\n":                            "show_headers is empty",
		"redaction:\n  show_json_paths: []\n":                         "show_json_paths is empty",
		"redaction:\n  show_json_paths: [order_id]\n":                 "must start with $",
		"redaction:\n  headers: [X-Card]\n  show_headers: [x-card]\n": "under both headers",
		"redaction:\n  json_paths: [$.a]\n  show_json_paths: [$.a]\n": "under both json_paths",
		"channels:\n  - queues: [\"p.*\"]\n    allow: [general]\n":    "channel id",
		"channels:\n  - queues: [\"p.*\"]\n":                          "allows no channel",
		"channels:\n  - allow: [C0PAY]\n":                             "names no queues",
	} {
		_, err := ParsePolicy([]byte(base + yaml))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "line ") {
			t.Errorf("%q: %v, want an error naming the line and %q", yaml, err, want)
		}
	}
}

// TestPolicyRedactionAllowlist: with show_headers every header's value but
// the listed ones (any case) and the broker's and dlqbot's bookkeeping is
// hidden, a header under both lists (in another spelling) hidden; with
// show_json_paths only the listed values of a JSON body are shown, a hide
// path under a shown one wins, and a body that is not JSON shows nothing.
func TestPolicyRedactionAllowlist(t *testing.T) {
	p := mustPolicy(t, `
roles:
  - name: sre
    users: [U012ABCDEF]
    grants:
      - queues: ["*"]
        actions: [read]
redaction:
  headers: [x-tenant-secret]
  json_paths: [$.customer.email]
  show_headers: [X-Tenant, x-request-id, x-tenant-secret-2]
  show_json_paths: [$.order_id, "$.items[*].sku", $.customer]
`)
	hidden := p.HiddenHeaders("orders.dlq", map[string]any{
		"x-tenant": "acme", "X-Request-Id": "req-1", "x-exception-message": "KYC failed for John Roe",
		"x-customer": map[string]any{"email": "john@example.com"}, "x-tenant-secret": "s3cret",
		"x-death": []any{map[string]any{"queue": "orders"}}, "x-first-death-queue": "orders", "x-replay-id": "r_1",
	})
	slices.Sort(hidden)
	if want := []string{"KYC failed for John Roe", "john@example.com", "s3cret"}; !slices.Equal(hidden, want) {
		t.Errorf("hidden headers %q, want %q", hidden, want)
	}
	out, vals, ok := p.RedactBody("orders.dlq", []byte(`{"order_id":"O-1","items":[{"sku":"S-1","qty":3}],"customer":{"tier":"gold","email":"john@example.com"},"diagnosis":"flu"}`))
	if want := `{"customer":{"email":"[redacted]","tier":"gold"},"diagnosis":"[redacted]","items":[{"qty":"[redacted]","sku":"S-1"}],"order_id":"O-1"}`; !ok || string(out) != want {
		t.Errorf("body %s (ok %v), want %s", out, ok, want)
	}
	slices.Sort(vals)
	if want := []string{"3", "flu", "john@example.com"}; !slices.Equal(vals, want) {
		t.Errorf("hidden body values %q, want %q", vals, want)
	}
	if out, _, ok := p.RedactBody("orders.dlq", []byte("order O-1 for John Roe")); ok || out != nil {
		t.Errorf("a body that is not JSON was shown: %q", out)
	}
	if hidden := mustPolicy(t, redactionPolicy).HiddenHeaders("q", map[string]any{"x-other": "kept"}); len(hidden) != 0 {
		t.Errorf("without show_headers another header is hidden: %q", hidden)
	}
}
