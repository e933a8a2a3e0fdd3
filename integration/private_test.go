package integration_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/mcp"
)

// Secrets in the DLQ's messages: a card number and an e-mail in the JSON
// body (hidden by json_paths), a card holder in a header (hidden by
// headers) that the exception message quotes too.
const (
	secretCard   = "4111111111111111"
	secretEmail  = "jane.doe@example.com"
	secretHolder = "Jane Q Holder"
	bodyMarker   = "12/30" // an unredacted body field: only readers see it
)

const redactionSection = `
redaction:
  headers: [x-card-holder]
  json_paths: [$.card.number, $.customer.email]
`

// privateDLQ publishes n Spring-style failures with secrets into a DLQ.
func privateDLQ(e *env, n int) (src, dlq string) {
	src, dlq = testkit.Name("src"), testkit.Name("dlq")
	e.rabbit.Topology(src, dlq, nil)
	var msgs []amqp.Publishing
	for i := range n {
		body := `{"card":{"number":"` + secretCard + `","exp":"` + bodyMarker + `"},"customer":{"email":"` + secretEmail + `"},"n":` + strconv.Itoa(i) + `}`
		msgs = append(msgs, testkit.Msg("pm-"+strconv.Itoa(i), []byte(body), amqp.Table{
			"x-original-exchange": "", "x-original-routingKey": src, "x-card-holder": secretHolder,
			"x-exception-message":    "card of " + secretHolder + " declined: limit exceeded",
			"x-exception-stacktrace": "java.lang.IllegalStateException: card of " + secretHolder + " declined",
		}))
	}
	e.rabbit.Publish(dlq, msgs...)
	e.rabbit.WaitCount(dlq, n, 20*time.Second)
	return src, dlq
}

// assertNoSecrets fails when s holds a secret (or, when noBody, any body
// field or exception text).
func assertNoSecrets(t *testing.T, where, s string, noBody bool) {
	t.Helper()
	leaks := []string{secretCard, secretEmail, secretHolder}
	if noBody {
		leaks = append(leaks, bodyMarker, "declined", "limit exceeded", "IllegalStateException")
	}
	for _, l := range leaks {
		if strings.Contains(s, l) {
			t.Errorf("%s shows %q", where, l)
		}
	}
}

// TestPrivateByDefault: with redaction rules in the policy, a preview's
// channel post holds no body byte and no exception text; its requester, a
// reader, gets the redacted samples ephemerally and the list in a direct
// message; Show samples answers a reader (redacted) and refuses a user
// without read; the API's and MCP's previews, and every log line (bot,
// engine, API, MCP), hold no redacted value and no preview token. The
// DLQ keeps every message throughout.
func TestPrivateByDefault(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	policy := apiPolicy(false) + redactionSection
	e := newAPIEnv(t, options{policy: policy, logs: logs}, mcp.Config{})
	src, dlq := privateDLQ(e.env, 6)
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })

	e.command("U0ALICE001", "preview "+dlq)
	post, token := e.waitPreview(1)
	raw, _ := json.Marshal(post)
	assertNoSecrets(t, "the channel post", string(raw)+post.Text, true)
	if buttonValue(post.RawBlocks, blocks.ActionSamples) != token {
		t.Fatalf("the post has no Show samples button for its token")
	}
	samples := e.waitEphemeral("U0ALICE001", 1)
	sraw, _ := json.Marshal(samples)
	assertNoSecrets(t, "the requester's samples", string(sraw), false)
	if !strings.Contains(string(sraw), bodyMarker) || !strings.Contains(string(sraw), engine.Hidden) || !strings.Contains(string(sraw), "declined") {
		t.Fatalf("the requester's samples lack the redacted body and exception: %s", sraw)
	}
	testkit.Eventually(t, 20*time.Second, "the list in the requester's DM", func() bool { return len(e.stub.Files()) == 1 })
	f := e.stub.Files()[0]
	if f.Channel != slackstub.DMChannel("U0ALICE001") {
		t.Fatalf("the list went to %s, want the requester's DM", f.Channel)
	}
	assertNoSecrets(t, "the list", string(f.Content), false)
	for _, m := range e.stub.Messages(channel) {
		if len(m.Files) > 0 {
			t.Fatalf("a file was posted in the channel: %+v", m.Files)
		}
	}

	// Show samples: refused without read, answered (redacted) with it.
	e.click("U0NOPERM01", blocks.ActionSamples, token, post.TS)
	if got := e.waitEphemeral("U0NOPERM01", 1); !strings.Contains(got.Text, "You need `read`") {
		t.Fatalf("samples for a user without read: %q", got.Text)
	}
	e.click("U0BOB00001", blocks.ActionSamples, token, post.TS)
	got := e.waitEphemeral("U0BOB00001", 1)
	graw, _ := json.Marshal(got)
	assertNoSecrets(t, "a reader's samples", string(graw), false)
	if !strings.Contains(string(graw), bodyMarker) {
		t.Fatalf("a reader's samples lack the body: %s", graw)
	}

	// The API and MCP show the same redacted preview.
	out := e.mustCall(http.StatusCreated, tokRunbook, "POST", "/api/v1/previews", map[string]string{"selection": dlq})
	araw, _ := json.Marshal(out)
	assertNoSecrets(t, "the API's preview", string(araw), false)
	if !strings.Contains(string(araw), engine.Hidden) {
		t.Fatalf("the API's preview shows nothing redacted: %s", araw)
	}
	s, _, err := mcpClient(t, e.url+"/mcp", tokAgent)
	if err != nil {
		t.Fatal(err)
	}
	var mp map[string]any
	if msg := callTool(t, s, "dlq_preview", map[string]any{"selection": dlq}, &mp); msg != "" {
		t.Fatalf("dlq_preview: %s", msg)
	}
	mraw, _ := json.Marshal(mp)
	assertNoSecrets(t, "the MCP preview", string(mraw), false)

	// Approve, so the flow logs tokens' uses too; then read every log.
	e.click("U0BOB00001", blocks.ActionApprove, token, post.TS)
	e.waitProgress(post.TS, "Finished", 60*time.Second)
	all := strings.Join(logs.lines(), "\n") + strings.Join(e.logs.lines(), "\n")
	if all == "" || len(logs.lines(audit.TokenRef(token))) == 0 {
		t.Fatalf("the logs name the preview nowhere by its reference %s", audit.TokenRef(token))
	}
	assertNoSecrets(t, "the logs", all, true)
	for _, tok := range []string{token, out["token"].(string), mp["token"].(string)} {
		if strings.Contains(all, tok) {
			t.Errorf("the logs hold the preview token %s", audit.TokenRef(tok))
		}
	}
	if n := e.rabbit.Count(dlq); n != 0 {
		t.Fatalf("%d left in the DLQ after the replay of all 6", n)
	}
}
