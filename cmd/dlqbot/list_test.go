package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
)

const tokLister = "list-reader-0123456789"

// TestListShowsOnlyReadableDLQs: with a policy that grants `read` on one
// DLQ only, `list` shows that DLQ — with its depth, its arrivals in the
// last hour, the top failure group its latest whole preview saw (id and
// type, never the exception's text) and its last replay — and never the
// other one (counted as hidden) nor the group a preview saw in it, at the
// terminal (--json, direct and through the server), in the HTTP API and
// in Slack (the stand-in's private reply).
func TestListShowsOnlyReadableDLQs(t *testing.T) {
	t.Parallel()
	me := currentUser()
	if me == "" {
		t.Skip("no OS user name to map in the policy")
	}
	r := testkit.Dial(t)
	srcA, readable := testkit.Name("src"), testkit.Name("dlq")
	srcB, secret := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(srcA, readable, nil)
	r.Topology(srcB, secret, nil)
	failing := func(n int, src, typ, text string) []amqp.Publishing {
		ms := testkit.Msgs(n, 10)
		for i := range ms {
			ms[i].Headers = amqp.Table{"NServiceBus.FailedQ": src, "NServiceBus.ExceptionInfo.ExceptionType": typ,
				"NServiceBus.ExceptionInfo.Message": text}
		}
		return ms
	}
	const readableType, readableText = "Orders.ReadableException", "card 4111 was declined"
	const secretType, secretText = "Vault.SecretException", "vault key rotated"
	r.Reject(srcA, failing(4, srcA, readableType, readableText)...)
	r.Reject(srcB, failing(2, srcB, secretType, secretText)...)
	r.WaitCount(readable, 4, 20*time.Second)
	r.WaitCount(secret, 2, 20*time.Second)
	r.Consume(srcA, func(amqp.Delivery) string { return "ack" })

	policy := `principals:
  - name: lister
    token_sha256: ` + commands.HashToken(tokLister) + `
    as_user: U0LISTER01
    os_users: [` + me + `]
roles:
  - name: listers
    users: [U0LISTER01]
    grants:
      - queues: [` + readable + `]
        actions: [read, replay]
      - queues: [` + srcA + `]
        actions: [publish]
`
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	stub := slackstub.New(tableSecret)
	t.Cleanup(stub.Close)
	env := merge(tableEnv(t, stub), "DLQBOT_PERMISSIONS", file)

	// One replay out of the readable DLQ, from the terminal: the list
	// names it as that DLQ's last.
	out, _, code := dlqbot(t, env, "preview", readable, "limit=1", "--json")
	if code != 0 {
		t.Fatalf("preview exit %d: %s", code, out)
	}
	out, _, code = dlqbot(t, env, "replay", oneJSON(t, out)["token"].(string), "rate=max", "--json")
	if code != 0 {
		t.Fatalf("replay exit %d: %s", code, out)
	}
	replayID := oneJSON(t, out)["replay_id"].(string)
	r.WaitCount(readable, 3, 20*time.Second)

	// A whole preview of each DLQ keeps its failure groups: the readable
	// one by the lister, the other with access control off.
	group := func(env map[string]string, dlq string) string {
		t.Helper()
		out, _, code := dlqbot(t, env, "preview", dlq, "--json")
		if code != 0 {
			t.Fatalf("preview of %s exit %d: %s", dlq, code, out)
		}
		a, _ := oneJSON(t, out)["arrivals"].(map[string]any)
		gs, _ := a["groups"].([]any)
		if len(gs) != 1 {
			t.Fatalf("preview of %s: groups %v", dlq, a)
		}
		return gs[0].(map[string]any)["group_id"].(string)
	}
	readableGroup := group(env, readable)
	secretGroup := group(merge(env, "DLQBOT_PERMISSIONS", ""), secret)

	var hidden func(where string, shown any)
	check := func(where string, doc map[string]any) {
		t.Helper()
		var names []string
		var mine map[string]any
		for _, d := range doc["dlqs"].([]any) {
			m := d.(map[string]any)
			names = append(names, m["name"].(string))
			if m["name"] == readable {
				mine = m
			}
		}
		if slices.Contains(names, secret) {
			t.Errorf("%s: lists %s, which the caller may not read: %v", where, secret, names)
		}
		if mine == nil {
			t.Fatalf("%s: does not list %s: %v", where, readable, doc)
		}
		if h, _ := doc["hidden"].(float64); h < 1 {
			t.Errorf("%s: hidden %v, want the other DLQ counted", where, doc["hidden"])
		}
		last, _ := mine["last_replay"].(map[string]any)
		if last["replay_id"] != replayID || mine["why"] != "dead_letter_target" {
			t.Errorf("%s: %s listed as %v, want its last replay %s", where, readable, mine, replayID)
		}
		// 4 dead-lettered, 1 of them replayed: the broker's samples may
		// have seen the 4 or only the 3 left.
		if n, ok := mine["arrivals_last_hour"].(float64); !ok || n < 3 || n > 4 {
			t.Errorf("%s: %s arrived %v in the last hour, want 3 or 4", where, readable, mine["arrivals_last_hour"])
		}
		g, _ := mine["top_group"].(map[string]any)
		if g["group_id"] != readableGroup || g["type"] != readableType || g["messages"] != 3.0 {
			t.Errorf("%s: %s's top group %v, want %s %s × 3", where, readable, g, readableGroup, readableType)
		}
		hidden(where, doc)
	}
	// hidden fails the test when what the list shows names the other
	// DLQ's group or any exception's text.
	hidden = func(where string, shown any) {
		t.Helper()
		text, ok := shown.(string)
		if !ok {
			js, _ := json.Marshal(shown)
			text = string(js)
		}
		for _, s := range []string{secret, secretGroup, secretType, secretText, readableText} {
			if strings.Contains(text, s) {
				t.Errorf("%s: shows %q:\n%s", where, s, text)
			}
		}
	}
	// The broker's statistics of the readable DLQ take a few seconds.
	testkit.Eventually(t, 2*time.Minute, "the arrivals in the listed DLQ", func() bool {
		out, _, code = dlqbot(t, env, "list", "--json")
		if code != 0 {
			t.Fatalf("list exit %d: %s", code, out)
		}
		for _, d := range oneJSON(t, out)["dlqs"].([]any) {
			if m := d.(map[string]any); m["name"] == readable {
				n, _ := m["arrivals_last_hour"].(float64)
				return n >= 3
			}
		}
		return false
	})
	check("terminal", oneJSON(t, out))
	text, _, _ := dlqbot(t, env, "list")
	if !strings.Contains(text, readable) || !strings.Contains(text, replayID) ||
		!strings.Contains(text, readableGroup+" "+readableType+" (3 at the preview just now)") {
		t.Errorf("readable list:\n%s", text)
	}
	hidden("readable list", text)

	base := tableServer(t, env, &testkit.Trail{})
	out, _, code = dlqbot(t, clientEnv(base, tokLister), "list", "--json")
	if code != 0 {
		t.Fatalf("list through the server exit %d: %s", code, out)
	}
	check("client", oneJSON(t, out))
	status, doc := apiCall(t, base, tokLister, "GET", "/api/v1/dlqs", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /api/v1/dlqs: %d %v", status, doc)
	}
	check("api", doc)

	resp, err := stub.SlashCommand(base, "/dlq", "list", "U0LISTER01", "C0TABLE")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("slack list: %v %v", err, resp)
	}
	resp.Body.Close()
	testkit.Eventually(t, 30*time.Second, "the private list in Slack", func() bool { return len(stub.Ephemerals("U0LISTER01")) > 0 })
	reply := stub.Ephemerals("U0LISTER01")[0].Text
	if !strings.Contains(reply, readable) || !strings.Contains(reply, replayID) ||
		!strings.Contains(reply, "top group `"+readableGroup+"` `"+readableType+"`") || !strings.Contains(reply, "arrived in the last hour") {
		t.Errorf("Slack's list:\n%s", reply)
	}
	hidden("Slack's list", reply)
}
