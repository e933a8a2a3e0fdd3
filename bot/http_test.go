package bot_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
)

const form = "application/x-www-form-urlencoded"

func commandBody(h *harness, text string) []byte {
	return []byte(h.stub.CommandForm("/dlq", text, "U_REQ", "C_OPS").Encode())
}

// assertNoEffect checks that nothing reached the engine or Slack.
func assertNoEffect(t *testing.T, h *harness) {
	t.Helper()
	if n := h.eng.calls.Load(); n != 0 {
		t.Errorf("engine called %d times, want 0", n)
	}
	if calls := h.stub.Calls(""); len(calls) != 0 {
		t.Errorf("slack called %d times (%s…), want 0", len(calls), calls[0].Method)
	}
	if e := h.stub.Ephemerals(""); len(e) != 0 {
		t.Errorf("%d ephemeral replies, want 0", len(e))
	}
}

func do(req *http.Request) (*http.Response, error) { return http.DefaultClient.Do(req) }

func status(t *testing.T, resp *http.Response, err error) int {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func TestRejectsUnverifiedRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	body := commandBody(h, "preview orders.dlq")
	click, err := h.stub.ClickPayload(blocks.ActionApprove, "p_fake", "U_APP", "C_OPS", "1732900000.000100")
	if err != nil {
		t.Fatal(err)
	}
	clickBody := []byte(url.Values{"payload": {string(click)}}.Encode())
	now := time.Now()
	cases := []struct {
		name   string
		path   string
		body   []byte
		header func(*http.Request)
	}{
		{"forged signature", slackstub.CommandsPath, body, func(r *http.Request) {
			r.Header.Set("X-Slack-Signature", slackstub.Sign("another-secret", now.Unix(), body))
		}},
		{"body changed after signing", slackstub.CommandsPath, body, func(r *http.Request) {
			r.Header.Set("X-Slack-Signature", slackstub.Sign(secret, now.Unix(), []byte("text=help")))
		}},
		{"stale timestamp (6 minutes)", slackstub.CommandsPath, body, func(r *http.Request) {
			old := now.Add(-6 * time.Minute).Unix()
			r.Header.Set("X-Slack-Request-Timestamp", itoa(old))
			r.Header.Set("X-Slack-Signature", slackstub.Sign(secret, old, body))
		}},
		{"future timestamp (6 minutes)", slackstub.InteractionsPath, clickBody, func(r *http.Request) {
			later := now.Add(6 * time.Minute).Unix()
			r.Header.Set("X-Slack-Request-Timestamp", itoa(later))
			r.Header.Set("X-Slack-Signature", slackstub.Sign(secret, later, clickBody))
		}},
		{"missing signature", slackstub.InteractionsPath, clickBody, func(r *http.Request) { r.Header.Del("X-Slack-Signature") }},
		{"missing timestamp", slackstub.CommandsPath, body, func(r *http.Request) { r.Header.Del("X-Slack-Request-Timestamp") }},
		{"no headers", slackstub.InteractionsPath, clickBody, func(r *http.Request) {
			r.Header.Del("X-Slack-Signature")
			r.Header.Del("X-Slack-Request-Timestamp")
		}},
		{"garbage signature", slackstub.CommandsPath, body, func(r *http.Request) { r.Header.Set("X-Slack-Signature", "v0=zz") }},
	}
	for _, c := range cases {
		req, err := h.stub.NewRequest(h.srv.URL+c.path, form, c.body, now)
		if err != nil {
			t.Fatal(err)
		}
		c.header(req)
		resp, err := do(req)
		if got := status(t, resp, err); got != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", c.name, got)
		}
	}
	assertNoEffect(t, h)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestRejectsMalformedRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	post := func(path string, body []byte) int {
		resp, err := h.stub.Post(h.srv.URL+path, form, body, time.Time{})
		return status(t, resp, err)
	}
	cases := []struct {
		name, path string
		body       []byte
		want       int
	}{
		{"command: not a form", slackstub.CommandsPath, []byte("%zz%"), 400},
		{"command: no user", slackstub.CommandsPath, []byte("command=%2Fdlq&text=help&channel_id=C1"), 400},
		{"command: no command", slackstub.CommandsPath, []byte("user_id=U1&text=help&channel_id=C1"), 400},
		{"command: empty", slackstub.CommandsPath, nil, 400},
		{"interaction: no payload", slackstub.InteractionsPath, []byte("foo=bar"), 400},
		{"interaction: payload not JSON", slackstub.InteractionsPath, []byte("payload=%7Bnot+json"), 400},
		{"interaction: payload without type", slackstub.InteractionsPath, []byte("payload=%7B%7D"), 400},
		{"interaction: no actions", slackstub.InteractionsPath,
			[]byte(url.Values{"payload": {`{"type":"block_actions","user":{"id":"U1"},"actions":[]}`}}.Encode()), 400},
		{"interaction: no user", slackstub.InteractionsPath,
			[]byte(url.Values{"payload": {`{"type":"block_actions","actions":[{"action_id":"dlq.approve","value":"p_fake"}]}`}}.Encode()), 400},
		{"too large", slackstub.CommandsPath, []byte("text=" + strings.Repeat("a", 2<<20)), 413},
	}
	for _, c := range cases {
		if got := post(c.path, c.body); got != c.want {
			t.Errorf("%s: status %d, want %d", c.name, got, c.want)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+slackstub.CommandsPath, nil)
	resp, err := do(req)
	if got := status(t, resp, err); got != http.StatusMethodNotAllowed {
		t.Errorf("GET: status %d, want 405", got)
	}
	assertNoEffect(t, h)
}

func TestAcksWithinThreeSecondsWhileTheEngineIsSlow(t *testing.T) {
	t.Parallel()
	eng := &fakeEngine{hold: make(chan struct{})}
	h := newHarness(t, eng, nil)
	start := time.Now()
	resp, err := h.stub.SlashCommand(h.srv.URL, "/dlq", "preview orders.dlq", "U_REQ", "C_OPS")
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	ack, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || took > time.Second {
		t.Fatalf("ack: status %d after %s, want 200 well under 3s", resp.StatusCode, took)
	}
	if !strings.Contains(string(ack), "Previewing") || !strings.Contains(string(ack), `"response_type":"ephemeral"`) {
		t.Fatalf("ack body %s: want an ephemeral 'Previewing' line", ack)
	}
	testkit.Eventually(t, 5*time.Second, "the engine to be asked", func() bool { return eng.calls.Load() == 1 })
	if n := len(h.stub.Messages("C_OPS")); n != 0 {
		t.Fatalf("%d messages posted before the preview finished", n)
	}
	close(eng.hold)
	testkit.Eventually(t, 5*time.Second, "the preview to be posted", func() bool { return len(h.stub.Messages("C_OPS")) == 1 })
	m := h.stub.Messages("C_OPS")[0]
	if !strings.Contains(string(m.RawBlocks), blocks.ActionApprove) || !strings.Contains(string(m.RawBlocks), blocks.ActionDiscard) {
		t.Fatalf("preview without Approve/Discard: %s", m.RawBlocks)
	}
}

func TestHelpAndMistakesAreAnsweredInTheAck(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	for text, want := range map[string]string{
		"help":            "Access control is off",
		"":                "Access control is off",
		"preview":         "preview needs the dead-letter queue",
		"frobnicate x":    "frobnicate",
		"replay":          "replay needs the token",
		"pause":           "pause",
		"preview a b c=d": "preview",
	} {
		resp, err := h.stub.SlashCommand(h.srv.URL, "/dlq", text, "U_REQ", "C_OPS")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var ack struct {
			ResponseType string `json:"response_type"`
			Text         string `json:"text"`
		}
		if err := json.Unmarshal(body, &ack); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%q: status %d body %s", text, resp.StatusCode, body)
		}
		if ack.ResponseType != "ephemeral" || !strings.Contains(ack.Text, want) {
			t.Errorf("%q: ack %+v, want ephemeral containing %q", text, ack, want)
		}
	}
	if n := h.eng.calls.Load(); n != 0 {
		t.Fatalf("engine called %d times for help and mistakes", n)
	}
}

func TestRefusedClickIsEphemeral(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	resp, err := h.stub.Click(h.srv.URL, blocks.ActionApprove, "p_unknown", "U_APP", "C_OPS", "1732900000.000100")
	if got := status(t, resp, err); got != 200 {
		t.Fatalf("status %d, want 200", got)
	}
	testkit.Eventually(t, 5*time.Second, "an ephemeral refusal", func() bool { return len(h.stub.Ephemerals("U_APP")) == 1 })
	if e := h.stub.Ephemerals("U_APP")[0]; !strings.Contains(e.Text, "unknown or has expired") || e.Via != "response_url" {
		t.Fatalf("refusal %+v", e)
	}
	if h.eng.approved.Load() != 0 || len(h.stub.Messages("C_OPS")) != 0 {
		t.Fatal("a refused click changed something")
	}
}

// TestRefusesAnotherWorkspaceOrApp: with DLQBOT_SLACK_TEAM_ID and
// DLQBOT_SLACK_APP_ID configured, a validly signed command or click from
// another team or app gets a refusal (the command's ack) and changes
// nothing: the engine is not asked and nothing is posted; the same
// command from the configured team and app is served.
func TestRefusesAnotherWorkspaceOrApp(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, func(c *bot.Config) { c.TeamID, c.AppID = slackstub.TeamID, slackstub.AppID })
	for _, tc := range []struct{ name, team, app string }{
		{"another team", "T0OTHER", slackstub.AppID},
		{"another app", slackstub.TeamID, "A0OTHER"},
		{"no team", "", slackstub.AppID},
	} {
		f := h.stub.CommandForm("/dlq", "preview orders.dlq", "U1", "C1")
		f.Set("team_id", tc.team)
		f.Set("api_app_id", tc.app)
		resp, err := h.stub.Post(h.srv.URL+slackstub.CommandsPath, form, []byte(f.Encode()), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "serves another Slack workspace or app") {
			t.Errorf("%s: status %d, body %s", tc.name, resp.StatusCode, body)
		}
		payload, err := h.stub.ClickPayload(blocks.ActionApprove, "p_fake", "U1", "C1", "1732900000.000100")
		if err != nil {
			t.Fatal(err)
		}
		var cb map[string]any
		_ = json.Unmarshal(payload, &cb)
		cb["team"] = map[string]any{"id": tc.team}
		cb["api_app_id"] = tc.app
		payload, _ = json.Marshal(cb)
		resp, err = h.stub.PostPayload(h.srv.URL, payload, time.Time{})
		if got := status(t, resp, err); got != 200 {
			t.Errorf("%s: click status %d", tc.name, got)
		}
	}
	// The configured team's preview is served; by the time it is posted,
	// a refused request would have reached the engine too.
	resp, err := h.stub.SlashCommand(h.srv.URL, "/dlq", "preview orders.dlq", "U1", "C1")
	if got := status(t, resp, err); got != 200 {
		t.Fatalf("served command: status %d", got)
	}
	testkit.Eventually(t, 10*time.Second, "the configured team's preview posted", func() bool { return len(h.stub.Messages("C1")) == 1 })
	if n := h.eng.calls.Load(); n != 1 {
		t.Fatalf("engine called %d times, want once (the configured team's preview only)", n)
	}
	if e := h.stub.Ephemerals(""); len(e) != 0 {
		t.Fatalf("refused requests got %d replies beside their acks", len(e))
	}
}
