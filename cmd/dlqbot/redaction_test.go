package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestTerminalRedacts: the terminal applies the permissions file's
// redaction like every front end: neither its JSON nor its text preview
// nor its log output shows a hidden header's or JSON path's value, while
// the rest of the body is shown; DLQBOT_EXCERPT_BYTES=0 shows no payload.
func TestTerminalRedacts(t *testing.T) {
	t.Parallel()
	const card, holder = "4111111111111111", "Jane Q Holder"
	perm := filepath.Join(t.TempDir(), "permissions.yaml")
	// The terminal acts as the principal the policy names for the OS user.
	me := currentUser()
	if me == "" {
		t.Skip("no OS user name to map in the policy")
	}
	if err := os.WriteFile(perm, []byte(`principals:
  - name: me
    token_sha256: `+commands.HashToken("unused-terminal-token")+`
    os_users: [`+me+`]
roles:
  - name: ops
    users: [U012ABCDEF]
    principals: [me]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
redaction:
  headers: [x-card-holder]
  json_paths: [$.card.number]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := merge(testEnv(t), "DLQBOT_PERMISSIONS", perm)
	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Publish(dlq, testkit.Msg("t-1", []byte(`{"card":{"number":"`+card+`","exp":"12/30"}}`), amqp.Table{
		"x-original-exchange": "", "x-original-routingKey": src, "x-card-holder": holder,
		"x-exception-message": "card of " + holder + " declined"}))
	r.WaitCount(dlq, 1, 20*time.Second)

	for _, args := range [][]string{{"preview", dlq, "--json"}, {"preview", dlq}} {
		out, stderr, code := dlqbot(t, env, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, stderr)
		}
		for _, leak := range []string{card, holder} {
			if strings.Contains(out+stderr, leak) {
				t.Errorf("%v shows %q:\n%s\n%s", args, leak, out, stderr)
			}
		}
		if !strings.Contains(out, "12/30") || !strings.Contains(out, "[redacted]") {
			t.Errorf("%v: want the redacted excerpt:\n%s", args, out)
		}
	}
	out, _, code := dlqbot(t, merge(env, "DLQBOT_EXCERPT_BYTES", "0"), "preview", dlq, "--json")
	if code != 0 || strings.Contains(out, "12/30") || strings.Contains(out, `"excerpt"`) {
		t.Fatalf("excerpts off (exit %d): %s", code, out)
	}
	if n := r.Count(dlq); n != 1 {
		t.Fatalf("the previews changed the DLQ: %d", n)
	}
}

// TestTerminalRedactsToAnAllowlist: under show_headers and
// show_json_paths a preview of a dead letter with headers and a JSON body
// shows the allowed headers' values and the allowed JSON values in its
// JSON (the sample's headers and excerpt; the text shows the headers
// whole and cuts the excerpt short), and no other header's value, no
// other JSON value and no exception text quoting one, anywhere in the
// output or the log.
func TestTerminalRedactsToAnAllowlist(t *testing.T) {
	t.Parallel()
	me := currentUser()
	if me == "" {
		t.Skip("no OS user name to map in the policy")
	}
	perm := filepath.Join(t.TempDir(), "permissions.yaml")
	if err := os.WriteFile(perm, []byte(`principals:
  - name: me
    os_users: [`+me+`]
roles:
  - name: ops
    principals: [me]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
redaction:
  excerpt_bytes: 2000
  show_headers: [x-tenant, x-request-id]
  show_json_paths: [$.order_id, "$.items[*].sku"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := merge(testEnv(t), "DLQBOT_PERMISSIONS", perm)
	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	shown := []string{"tenant-acme-77", "req-4242-abcd", "O-98765", "SKU-111", "SKU-222"}
	secret := []string{"John Roe", "john.roe@example.com", "hypertension", "1999", "4111111111111111", "KYC failed", "Lyon-69001"}
	r.Publish(dlq, testkit.Msg("t-1", []byte(`{"order_id":"O-98765","items":[{"sku":"SKU-111","price":1999},{"sku":"SKU-222"}],`+
		`"customer":{"name":"John Roe","email":"john.roe@example.com","card":"4111111111111111"},"diagnosis":"hypertension"}`), amqp.Table{
		"x-original-exchange": "", "x-original-routingKey": src, "x-tenant": "tenant-acme-77", "x-request-id": "req-4242-abcd",
		"x-customer": "Lyon-69001", "x-exception-message": "KYC failed for John Roe <john.roe@example.com>: hypertension"}))
	r.WaitCount(dlq, 1, 20*time.Second)

	for _, args := range [][]string{{"preview", dlq, "--json"}, {"preview", dlq}} {
		out, stderr, code := dlqbot(t, env, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, stderr)
		}
		for _, leak := range secret {
			if strings.Contains(out+stderr, leak) {
				t.Errorf("%v shows %q:\n%s\n%s", args, leak, out, stderr)
			}
		}
		want := shown
		if args[len(args)-1] != "--json" {
			want = shown[:2] // the text cuts the excerpt short; its headers are whole
		} else if !strings.Contains(out, `"excerpt"`) || !strings.Contains(out, `"headers"`) {
			t.Errorf("the JSON has no sample with its excerpt and headers:\n%s", out)
		}
		for _, s := range want {
			if !strings.Contains(out, s) {
				t.Errorf("%v does not show the allowed value %q:\n%s", args, s, out)
			}
		}
	}
}
