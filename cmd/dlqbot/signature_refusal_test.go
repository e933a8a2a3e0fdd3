package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestBadSignatureIsOneRefusalAcrossFrontEnds: a preview token whose DLQ
// and target someone changed in Redis is refused by every front end with
// the same typed refusal — the terminal's JSON code bad_signature (exit
// 1), the HTTP API's 409 bad_signature, MCP's [bad_signature], Slack's
// recorded refusal and ephemeral sentence — each saying the record
// "failed its signature check: refused"; the trail records each as
// refused with the token's reference; the server logs it at error level
// naming the reference, never the token; and the broker shows nothing
// moved.
func TestBadSignatureIsOneRefusalAcrossFrontEnds(t *testing.T) {
	t.Parallel()
	me := currentUser()
	if me == "" {
		t.Skip("no OS user name to map in the policy")
	}
	stub := slackstub.New(tableSecret)
	t.Cleanup(stub.Close)
	perm := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(perm, []byte(tablePolicy(me, "operator")), 0o600); err != nil {
		t.Fatal(err)
	}
	env := merge(tableEnv(t, stub), "DLQBOT_PERMISSIONS", perm)
	trail := &testkit.Trail{}
	logs := &lockedBuffer{}
	base := tableServerLog(t, env, trail, logs)
	r, dlq := tableDLQ(t, 3)
	status, out := apiCall(t, base, tokViewer, "POST", "/api/v1/previews", map[string]string{"selection": dlq})
	if status != http.StatusCreated {
		t.Fatalf("preview: %d %v", status, out)
	}
	token := out["token"].(string)

	// Whoever can write Redis renames the DLQ and the target in the
	// token's header (same lengths keep the format).
	rdb, _ := testkit.Redis(t)
	ctx := context.Background()
	key := env["DLQBOT_REDIS_PREFIX"] + "{" + token + "}:token" // store/keys.go's layout
	raw, err := rdb.Get(ctx, key).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.ReplaceAll(raw, []byte(dlq), []byte(strings.Repeat("x", len(dlq))))
	if bytes.Equal(edited, raw) {
		t.Fatal("the token does not name its DLQ")
	}
	if err := rdb.Set(ctx, key, edited, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	const sentence = "failed its signature check: refused"
	ref := audit.TokenRef(token)

	// The terminal (acting as operator).
	tout, _, code := dlqbot(t, env, "replay", token, "--json")
	if doc := oneJSON(t, tout); code != 1 || doc["code"] != "bad_signature" || !strings.Contains(doc["error"].(string), sentence) {
		t.Errorf("terminal: exit %d, %v", code, doc)
	}
	// The HTTP API.
	status, out = apiCall(t, base, tokOperator, "POST", "/api/v1/previews/"+token+"/approve", nil)
	if status != http.StatusConflict || out["code"] != "bad_signature" || !strings.Contains(out["error"].(string), sentence) ||
		!strings.Contains(out["error"].(string), ref) || strings.Contains(out["error"].(string), token) {
		t.Errorf("api: %d %v", status, out)
	}
	// MCP.
	if got := mcpTool(t, base, tokOperator, "dlq_replay", map[string]any{"token": token}); got != "bad_signature" {
		t.Errorf("mcp: %s", got)
	}
	// Slack.
	ephemerals := len(stub.Ephemerals("U0OPERATOR"))
	if d := slackDecision(t, stub, base, trail, "U0OPERATOR", "replay "+token, audit.OpApprove); d != "bad_signature" {
		t.Errorf("slack: %s", d)
	}
	testkit.Eventually(t, 20*time.Second, "Slack's ephemeral refusal", func() bool { return len(stub.Ephemerals("U0OPERATOR")) > ephemerals })
	if got := stub.Ephemerals("U0OPERATOR")[ephemerals].Text; !strings.Contains(got, sentence) {
		t.Errorf("slack said %q", got)
	}
	// The trail: refused, with the token's reference.
	for _, fe := range []string{"api", "mcp", "slack"} {
		e, n := trail.Last(fe, audit.OpApprove)
		if n == 0 || e.Outcome != audit.OutcomeRefused || e.Code != "bad_signature" || e.TokenRef != ref {
			t.Errorf("trail through %s: %+v", fe, e)
		}
	}
	// Loudly, with the reference only.
	var loud []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"level":"error"`) && strings.Contains(l, ref) {
			loud = append(loud, l)
		}
	}
	if len(loud) < 3 {
		t.Errorf("%d error lines name %s, want one per refusal at least:\n%s", len(loud), ref, logs.String())
	}
	if strings.Contains(logs.String(), token) {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, token) {
				t.Errorf("a log line holds the token itself: %s", l)
			}
		}
	}
	if n := r.Count(dlq); n != 3 {
		t.Fatalf("the DLQ holds %d, want 3", n)
	}
}

// TestEditedApproverIsRefusedAcrossFrontEnds: a finished replay whose
// approver someone changed in Redis is refused, not shown, by every
// front end's status — the terminal (bad_signature, exit 1), the HTTP API
// (409 bad_signature), MCP ([bad_signature]) and Slack (the refusal's
// sentence) — and the server logs it at error level.
func TestEditedApproverIsRefusedAcrossFrontEnds(t *testing.T) {
	t.Parallel()
	me := currentUser()
	if me == "" {
		t.Skip("no OS user name to map in the policy")
	}
	stub := slackstub.New(tableSecret)
	t.Cleanup(stub.Close)
	perm := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(perm, []byte(tablePolicy(me, "operator")), 0o600); err != nil {
		t.Fatal(err)
	}
	env := merge(tableEnv(t, stub), "DLQBOT_PERMISSIONS", perm)
	logs := &lockedBuffer{}
	base := tableServerLog(t, env, &testkit.Trail{}, logs)
	r, dlq := tableDLQ(t, 2)
	status, out := apiCall(t, base, tokOperator, "POST", "/api/v1/previews", map[string]string{"selection": dlq})
	if status != http.StatusCreated {
		t.Fatalf("preview: %d %v", status, out)
	}
	status, out = apiCall(t, base, tokOperator, "POST", "/api/v1/previews/"+out["token"].(string)+"/approve", map[string]any{"rate": "max"})
	if status != http.StatusCreated {
		t.Fatalf("approve: %d %v", status, out)
	}
	id := out["replay_id"].(string)
	testkit.Eventually(t, 60*time.Second, "the replay to finish", func() bool {
		_, out := apiCall(t, base, tokOperator, "GET", "/api/v1/replays/"+id, nil)
		return out["state"] == "finished"
	})
	r.WaitCount(dlq, 0, 20*time.Second)

	rdb, _ := testkit.Redis(t)
	ctx := context.Background()
	key := env["DLQBOT_REDIS_PREFIX"] + "{" + id + "}:replay" // store/keys.go's layout
	raw, err := rdb.HGet(ctx, key, "data").Result()
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(raw, `"approver":"api:operator"`, `"approver":"U0SOMEONE1"`, 1)
	if edited == raw {
		edited = strings.Replace(raw, `"approver":"U0OPERATOR"`, `"approver":"U0SOMEONE1"`, 1)
	}
	if edited == raw {
		t.Fatalf("the record does not name its approver: %s", raw)
	}
	if err := rdb.HSet(ctx, key, "data", edited).Err(); err != nil {
		t.Fatal(err)
	}
	const sentence = "failed its signature check: refused"
	tout, _, code := dlqbot(t, env, "status", id, "--json")
	if doc := oneJSON(t, tout); code != 1 || doc["code"] != "bad_signature" || !strings.Contains(doc["error"].(string), sentence) {
		t.Errorf("terminal: exit %d, %v", code, doc)
	}
	if status, out := apiCall(t, base, tokOperator, "GET", "/api/v1/replays/"+id, nil); status != http.StatusConflict || out["code"] != "bad_signature" {
		t.Errorf("api: %d %v", status, out)
	}
	if got := mcpTool(t, base, tokOperator, "dlq_status", map[string]any{"replay_id": id}); got != "bad_signature" {
		t.Errorf("mcp: %s", got)
	}
	// The list still answers, the edited record marked by its id alone.
	status, out = apiCall(t, base, tokOperator, "GET", "/api/v1/replays", nil)
	listed, _ := out["replays"].([]any)
	var marked map[string]any
	for _, x := range listed {
		if m, _ := x.(map[string]any); m["replay_id"] == id {
			marked = m
		}
	}
	if status != http.StatusOK || marked == nil || marked["unverifiable"] != true || marked["approver"] != "" {
		t.Errorf("api list: %d %v, want 200 with %s marked unverifiable", status, out, id)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `dlqbot_records_refused_total{record="replay"}`) {
		t.Errorf("no dlqbot_records_refused_total for the replay in /metrics")
	}
	n := len(stub.Ephemerals("U0OPERATOR"))
	resp, err = stub.SlashCommand(base, "/dlq", "status "+id, "U0OPERATOR", "C0TABLE")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("slack: %v %v", err, resp)
	}
	resp.Body.Close()
	testkit.Eventually(t, 20*time.Second, "Slack's answer", func() bool { return len(stub.Ephemerals("U0OPERATOR")) > n })
	if got := stub.Ephemerals("U0OPERATOR")[n].Text; !strings.Contains(got, sentence) || strings.Contains(got, "U0SOMEONE1") {
		t.Errorf("slack said %q", got)
	}
	if !strings.Contains(logs.String(), `"level":"error"`) || !strings.Contains(logs.String(), id) {
		t.Errorf("no error line names replay %s", id)
	}
}
