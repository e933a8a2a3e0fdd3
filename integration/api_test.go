package integration_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/mcp"
)

// TestAPIPreviewApproveEventsCheck runs the whole flow through the HTTP
// API: preview (changes nothing) → approve → the event stream to its end
// → status → check, and Slack shows the replay naming the principal.
func TestAPIPreviewApproveEventsCheck(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, options{policy: apiPolicy(false)}, mcp.Config{})
	src, dlq := dlqWith(e.env, 25)
	cons := e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })

	token := e.preview(tokRunbook, dlq)
	if n := e.rabbit.Count(dlq); n != 25 {
		t.Fatalf("the preview changed the DLQ: %d messages, want 25", n)
	}
	r := replayOf(t, e.mustCall(http.StatusCreated, tokRunbook, "POST", "/api/v1/previews/"+token+"/approve",
		map[string]any{"step": 5, "rate": "max"}))
	if r.Approver != "api:runbook" || r.Requester != "api:runbook" || r.Total != 25 || r.Params.Step != 5 {
		t.Fatalf("approved replay %+v", r)
	}
	evs := e.events(tokRunbook, r.ID, "", 90*time.Second)
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.kind)
	}
	if kinds[0] != "replay" || kinds[len(kinds)-1] != "end" || !slices.Contains(kinds, "started") ||
		!slices.Contains(kinds, "step_passed") || kinds[len(kinds)-2] != "finished" {
		t.Fatalf("event stream kinds %q", kinds)
	}
	// A follower that reconnects with Last-Event-ID gets only what followed.
	resumed := e.events(tokRunbook, r.ID, evs[1].id, 30*time.Second)
	if len(resumed) != len(evs)-1 || resumed[1].id != evs[2].id {
		t.Errorf("resumed after %q: %d events, want %d", evs[1].id, len(resumed), len(evs)-1)
	}
	got := replayOf(t, e.mustCall(http.StatusOK, tokRunbook, "GET", "/api/v1/replays/"+r.ID, nil))
	if got.State != engine.StateFinished || got.Sent != 25 {
		t.Fatalf("replay after the stream ended: %+v", got)
	}
	// The broker agrees: the DLQ is empty and the consumer took 25.
	if n := e.rabbit.Count(dlq); n != 0 {
		t.Fatalf("%d messages left in the DLQ", n)
	}
	testkit.Eventually(t, 10*time.Second, "the consumer to ack 25", func() bool { acked, _ := cons.Counts(); return acked == 25 })

	check := e.mustCall(http.StatusOK, tokRunbook, "POST", "/api/v1/replays/"+r.ID+"/check", nil)
	if check["replay_id"] != r.ID || check["replayed"] != float64(25) || check["returned"] != float64(0) {
		t.Fatalf("check %v", check)
	}
	list := e.mustCall(http.StatusOK, tokRunbook, "GET", "/api/v1/replays?limit=5", nil)
	if rs, _ := list["replays"].([]any); len(rs) != 1 {
		t.Fatalf("list %v", list)
	}
	// The token started one replay; a second approval is refused.
	again := e.mustCall(http.StatusConflict, tokRunbook, "POST", "/api/v1/previews/"+token+"/approve", nil)
	if again["code"] != "token_used" || again["error"] == "" {
		t.Fatalf("second approval %v", again)
	}
	// Every call is logged with its principal, and a path naming a token
	// shows its reference instead (tokens are never logged).
	if l := e.logs.lines(`"principal":"runbook"`, `"path":"/api/v1/previews/`+audit.TokenRef(token)+`/approve"`, `"status":201`); len(l) != 1 {
		t.Errorf("approval logged %d times with its principal: %q", len(l), e.logs.lines("api call"))
	}
	if l := e.logs.lines(token); len(l) != 0 {
		t.Errorf("the log holds the token: %q", l)
	}
	// Slack shows it like any other, naming the principal: a thread in the
	// API channel with the finished progress, and the activity lines.
	ch, thread, _, err := e.store.SlackRefs().Get(e.ctx, r.ID)
	if err != nil || ch != channel || thread == "" {
		t.Fatalf("replay not shown in Slack: %s %s %v", ch, thread, err)
	}
	if top := e.thread(thread); !strings.Contains(top.Content(), "Approved by api:runbook") && !strings.Contains(top.Content(), "approved by api:runbook") {
		t.Errorf("thread head %q does not name the principal", top.Content())
	}
	e.waitProgress(thread, "Finished", 30*time.Second)
	testkit.Eventually(t, 10*time.Second, "the finished activity line", func() bool { return contains(e.activityLines(), "finished") })
	if !contains(e.activityLines(), "approved by api:runbook") {
		t.Errorf("activity %q does not name the principal", e.activityLines())
	}
}

// TestAPITokenAcrossFrontEnds checks that a token is exact whichever
// front end approves it: a preview made in the API is approved in Slack
// (messages dead-lettered after the preview stay), and a Slack preview is
// approved through the API (threaded under the preview).
func TestAPITokenAcrossFrontEnds(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, options{policy: apiPolicy(false)}, mcp.Config{})

	src, dlq := dlqWith(e.env, 12)
	token := e.preview(tokRunbook, dlq)
	e.rabbit.Reject(src, testkit.Msgs(3, 50)...) // after the preview: not in the token
	e.rabbit.WaitCount(dlq, 15, 20*time.Second)
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })
	e.command("U0BOB00001", "replay "+token+" rate=max")
	var r engine.Replay
	testkit.Eventually(t, 60*time.Second, "the Slack-approved replay to finish", func() bool {
		rs := e.replays()
		if len(rs) == 1 {
			r = rs[0]
		}
		return r.State == engine.StateFinished
	})
	if r.Requester != "api:runbook" || r.Approver != "U0BOB00001" || r.Sent != 12 || r.Token != token {
		t.Fatalf("replay %+v", r)
	}
	if n := e.rabbit.Count(dlq); n != 3 {
		t.Fatalf("DLQ holds %d messages, want the 3 dead-lettered after the preview", n)
	}

	src2, dlq2 := dlqWith(e.env, 8)
	e.rabbit.Consume(src2, func(amqp.Delivery) string { return "ack" })
	e.command("U0BOB00001", "preview "+dlq2)
	pv, token2 := e.waitPreview(1)
	r2 := replayOf(t, e.mustCall(http.StatusCreated, tokOther, "POST", "/api/v1/previews/"+token2+"/approve", map[string]any{"rate": 100}))
	if r2.Requester != "U0BOB00001" || r2.Approver != "api:other" || r2.Total != 8 {
		t.Fatalf("replay %+v", r2)
	}
	e.waitProgress(pv.TS, "Finished", 60*time.Second)
	testkit.Eventually(t, 10*time.Second, "the preview to name its approver", func() bool {
		return strings.Contains(e.thread(pv.TS).Content(), "api:other")
	})
	if n := e.rabbit.Count(dlq2); n != 0 {
		t.Fatalf("%d messages left in %s", n, dlq2)
	}
}

// TestAPIRefusals: a missing or forged bearer token, a principal without
// `replay`, and bad input are refused with a code and a sentence, and
// nothing moves; without a permissions file the API is off.
func TestAPIRefusals(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, options{policy: apiPolicy(false)}, mcp.Config{})
	src, dlq := dlqWith(e.env, 6)
	cons := e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })

	for _, tok := range []string{"", forged, commands.HashToken(tokRunbook)} {
		status, out := e.call(tok, "POST", "/api/v1/previews", map[string]string{"selection": dlq})
		if status != http.StatusUnauthorized || out["code"] != "unauthorized" || out["error"] == "" {
			t.Errorf("token %q: %d %v", tok, status, out)
		}
	}
	if l := e.logs.lines(`"code":"unauthorized"`, `"path":"/api/v1/previews"`); len(l) != 3 {
		t.Errorf("refused calls logged %d times, want 3: %q", len(l), l)
	}
	token := e.preview(tokViewer, dlq) // read is enough to preview
	out := e.mustCall(http.StatusForbidden, tokViewer, "POST", "/api/v1/previews/"+token+"/approve", nil)
	if out["code"] != "forbidden" || !strings.Contains(out["error"].(string), "`replay`") {
		t.Fatalf("viewer approval: %v", out)
	}
	for _, bad := range []struct {
		path string
		body any
		code string
	}{
		{"/api/v1/previews", map[string]string{"selection": dlq + " reason=bogus"}, "bad_selection"},
		{"/api/v1/previews", map[string]string{"selection": ""}, "bad_selection"},
		{"/api/v1/previews", map[string]any{"selection": dlq, "force": true}, "bad_request"},
		{"/api/v1/previews/" + token + "/approve", map[string]any{"step": -3}, "bad_request"},
		{"/api/v1/previews/" + token + "/approve", map[string]any{"rate": "fast"}, "bad_request"},
		{"/api/v1/previews/p_nosuchtoken/approve", nil, "token_not_found"},
		{"/api/v1/replays/r_nosuch/cancel", nil, "replay_not_found"},
	} {
		status, out := e.call(tokRunbook, "POST", bad.path, bad.body)
		if status < 400 || out["code"] != bad.code || out["error"] == "" {
			t.Errorf("POST %s %v: %d %v, want code %s", bad.path, bad.body, status, out, bad.code)
		}
	}
	// Nothing moved: no replay, the DLQ whole, the consumer idle; the
	// token is still good for someone allowed.
	if rs := e.replays(); len(rs) != 0 {
		t.Fatalf("replays after refusals: %+v", rs)
	}
	if n := e.rabbit.Count(dlq); n != 6 {
		t.Fatalf("DLQ holds %d, want 6", n)
	}
	if acked, _ := cons.Counts(); acked != 0 {
		t.Fatalf("the consumer got %d messages", acked)
	}
	if _, err := e.store.Tokens().Load(e.ctx, token); err != nil {
		t.Fatalf("the refused token is gone: %v", err)
	}

	off := newAPIEnv(t, options{}, mcp.Config{})
	for _, path := range []string{"/api/v1/replays", "/mcp"} {
		status, out := off.call(tokRunbook, "GET", path, nil)
		if status != http.StatusNotFound || out["code"] != "api_disabled" {
			t.Errorf("no permissions file: GET %s: %d %v", path, status, out)
		}
	}
}

// TestAPIFourEyes: with require_distinct_approver a principal cannot
// approve its own preview, and a principal mapped to a Slack user is that
// user in either front end.
func TestAPIFourEyes(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, options{policy: apiPolicy(true)}, mcp.Config{})
	src, dlq := dlqWith(e.env, 5)
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })

	own := e.preview(tokRunbook, dlq)
	out := e.mustCall(http.StatusForbidden, tokRunbook, "POST", "/api/v1/previews/"+own+"/approve", nil)
	if !strings.Contains(out["error"].(string), "someone else") {
		t.Fatalf("own approval: %v", out)
	}
	// Alice's personal token previews as U0ALICE001: Alice in Slack may
	// not approve it, someone else (a principal) may.
	alices := e.preview(tokAlice, dlq)
	e.command("U0ALICE001", "replay "+alices)
	if eph := e.waitEphemeral("U0ALICE001", 1); !strings.Contains(eph.Text, "someone else") {
		t.Fatalf("Alice approving her API preview in Slack: %q", eph.Text)
	}
	// And the reverse: Alice's Slack preview, approved with her token.
	e.command("U0ALICE001", "preview "+dlq)
	_, slackTok := e.waitPreview(1)
	out = e.mustCall(http.StatusForbidden, tokAlice, "POST", "/api/v1/previews/"+slackTok+"/approve", nil)
	if !strings.Contains(out["error"].(string), "someone else") {
		t.Fatalf("Alice approving her Slack preview with her token: %v", out)
	}
	if rs := e.replays(); len(rs) != 0 || e.rabbit.Count(dlq) != 5 {
		t.Fatalf("refused approvals moved something: %d replays, DLQ %d", len(rs), e.rabbit.Count(dlq))
	}
	r := replayOf(t, e.mustCall(http.StatusCreated, tokOther, "POST", "/api/v1/previews/"+own+"/approve", map[string]any{"rate": "max"}))
	if r.Requester != "api:runbook" || r.Approver != "api:other" {
		t.Fatalf("replay %+v", r)
	}
	testkit.Eventually(t, 60*time.Second, "the replay to finish", func() bool {
		got, err := e.store.Replays().Get(e.ctx, r.ID)
		return err == nil && got.State == engine.StateFinished
	})
	if n := e.rabbit.Count(dlq); n != 0 {
		t.Fatalf("%d left in the DLQ", n)
	}
}

// TestAPIApproveWhatChanged: the API's approval re-confirms what changed
// since the preview, like the Approve button: nothing is sent until the
// client quotes the digest of exactly the changes it was shown.
func TestAPIApproveWhatChanged(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, options{policy: apiPolicy(false)}, mcp.Config{})
	src, dlq := dlqWith(e.env, 8)
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })
	token := e.preview(tokRunbook, dlq)
	ch := e.rabbit.Channel()
	for range 2 { // two previewed messages leave the DLQ behind dlqbot's back
		if _, ok, err := ch.Get(dlq, true); err != nil || !ok {
			t.Fatalf("get: %v %v", ok, err)
		}
	}
	path := "/api/v1/previews/" + token + "/approve"
	out := e.mustCall(http.StatusConflict, tokRunbook, "POST", path, map[string]any{"rate": "max"})
	changes, _ := out["changes"].([]any)
	digest, _ := out["changes_digest"].(string)
	if out["code"] != "changed" || len(changes) != 1 || digest == "" || !strings.Contains(out["error"].(string), "nothing was sent") {
		t.Fatalf("first approval: %v", out)
	}
	if c := changes[0].(map[string]any); c["kind"] != "messages_gone" || c["messages"] != float64(2) {
		t.Fatalf("change %v", c)
	}
	out = e.mustCall(http.StatusConflict, tokRunbook, "POST", path, map[string]any{"rate": "max", "confirm_changes": "0123456789abcdef"})
	if out["code"] != "changed" || out["changes_digest"] != digest {
		t.Fatalf("approval confirming other changes: %v", out)
	}
	if rs := e.replays(); len(rs) != 0 || e.rabbit.Count(dlq) != 6 {
		t.Fatalf("unconfirmed approvals moved something: %d replays, DLQ %d", len(rs), e.rabbit.Count(dlq))
	}
	r := replayOf(t, e.mustCall(http.StatusCreated, tokRunbook, "POST", path, map[string]any{"rate": "max", "confirm_changes": digest}))
	// The two messages taken behind dlqbot's back were neither sent nor in
	// the DLQ: the replay sends the other six, and does not end as a plain
	// success (issue 11) but stopped, saying loudly that two disappeared.
	testkit.Eventually(t, 60*time.Second, "the confirmed replay to end", func() bool {
		got, err := e.store.Replays().Get(e.ctx, r.ID)
		r = got
		return err == nil && (got.State == engine.StateStopped || got.State.Terminal())
	})
	if r.State != engine.StateStopped || r.Sent != 6 || r.Missing != 2 || e.rabbit.Count(dlq) != 0 || !strings.Contains(r.Note, "2 MISSING") {
		t.Fatalf("replay %s sent %d, missing %d (%q); DLQ %d", r.State, r.Sent, r.Missing, r.Note, e.rabbit.Count(dlq))
	}
}

// TestAPIPauseResumeCancel: the brake through the API — `read` may pause
// and cancel, resuming needs what approving needs — and messages not sent
// stay in the DLQ; the event stream ends with the cancellation.
func TestAPIPauseResumeCancel(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, options{policy: apiPolicy(false)}, mcp.Config{})
	src, dlq := dlqWith(e.env, 40)
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })
	token := e.preview(tokRunbook, dlq)
	r := replayOf(t, e.mustCall(http.StatusCreated, tokRunbook, "POST", "/api/v1/previews/"+token+"/approve",
		map[string]any{"step": 5, "rate": 5}))
	base := "/api/v1/replays/" + r.ID
	state := func() engine.Replay {
		return replayOf(t, e.mustCall(http.StatusOK, tokViewer, "GET", base, nil))
	}
	testkit.Eventually(t, 30*time.Second, "the replay to run", func() bool { return state().State == engine.StateRunning })
	e.mustCall(http.StatusAccepted, tokViewer, "POST", base+"/pause", nil)
	testkit.Eventually(t, 30*time.Second, "the replay to pause", func() bool { return state().State == engine.StatePaused })
	paused := state()
	if out := e.mustCall(http.StatusForbidden, tokViewer, "POST", base+"/resume", nil); out["code"] != "forbidden" {
		t.Fatalf("viewer resume: %v", out)
	}
	e.mustCall(http.StatusAccepted, tokRunbook, "POST", base+"/resume", nil)
	testkit.Eventually(t, 30*time.Second, "the replay to run again", func() bool { return state().State == engine.StateRunning })
	// Cancel cannot be undone: `read` pulls the brake (pause), cancel
	// needs `replay`.
	if out := e.mustCall(http.StatusForbidden, tokViewer, "POST", base+"/cancel", nil); out["code"] != "forbidden" {
		t.Fatalf("viewer cancel: %v", out)
	}
	if got := state(); got.State != engine.StateRunning {
		t.Fatalf("a refused cancel changed the replay: %s", got.State)
	}
	e.mustCall(http.StatusAccepted, tokRunbook, "POST", base+"/cancel", nil)
	evs := e.events(tokViewer, r.ID, "", 60*time.Second)
	if last := evs[len(evs)-2]; last.kind != "cancelled" {
		t.Fatalf("stream ended after %q", last.kind)
	}
	end := state()
	if end.State != engine.StateCancelled || end.Sent >= 40 || end.Sent < paused.Sent {
		t.Fatalf("cancelled replay %+v (paused at %d sent)", end, paused.Sent)
	}
	testkit.Eventually(t, 10*time.Second, "the unsent messages to be in the DLQ", func() bool { return e.rabbit.Count(dlq) == 40-end.Sent })
	if out := e.mustCall(http.StatusConflict, tokRunbook, "POST", base+"/resume", nil); out["code"] != "not_controllable" {
		t.Fatalf("resuming a cancelled replay: %v", out)
	}
}
