package integration_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/jsonschema-go/jsonschema"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"gopkg.in/yaml.v3"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/dashboard"
	"github.com/stroma/dlqbot/dashboard/dashapi"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/mcp"
	"github.com/stroma/dlqbot/ops"
)

// dashEnv is an env with the HTTP API (recording the audit trail) and the
// dashboard served on one server, as `dlqbot serve` mounts them.
type dashEnv struct {
	*env
	url string
}

// tokOutsider's principal may read only other DLQs than the tests'.
const tokOutsider = "tok-outsider-0123456789"

// dashPolicy is apiPolicy with an outsider, who may read only queues named
// elsewhere.*, and oncall, whom the terminal acts as for OS user oncall
// and who may read every queue.
func dashPolicy() string {
	return strings.Replace(apiPolicy(false), "roles:\n", `  - name: outsider
    token_sha256: `+commands.HashToken(tokOutsider)+`
  - name: oncall
    os_users: [oncall]
roles:
  - name: outsiders
    principals: [outsider]
    grants:
      - queues: ["elsewhere.*"]
        actions: [read, replay, publish]
  - name: oncall
    principals: [oncall]
    grants:
      - queues: ["*"]
        actions: [read]
`, 1)
}

func newDashEnv(t *testing.T) *dashEnv {
	t.Helper()
	return newDashEnvWith(t, options{})
}

// newDashEnvWith is newDashEnv with o's other settings (taps, say).
func newDashEnvWith(t *testing.T, o options) *dashEnv {
	t.Helper()
	o.policy, o.events, o.apiChannel, o.storeAudit = dashPolicy(), true, channel, true
	e := newEnv(t, o)
	policy := e.ops.Policy()
	svc, err := api.New(api.Config{EventPoll: 50 * time.Millisecond}, api.Deps{
		Ops: e.ops, Events: e.store.Events(), Slack: e.bot, AuditLog: e.store.Audit(), Log: logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := amqp.New(amqp.Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	d, err := dashboard.New(dashboard.Config{Policy: policy}, dashboard.Deps{Backend: dashapi.New(e.ops, svc, b, e.store.Tokens()), Threads: e.store.SlackRefs(), Log: logger()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", svc.Handler())
	mux.Handle("/dashboard/", d.Handler())
	mux.Handle("/mcp", mcp.Handler(svc, mcp.Config{}, logger()))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &dashEnv{env: e, url: srv.URL}
}

// call makes an API call as tok and decodes its JSON answer.
func (d *dashEnv) call(want int, tok, method, path string, body any) map[string]any {
	d.t.Helper()
	a := &apiEnv{env: d.env, url: d.url}
	return a.mustCall(want, tok, method, path, body)
}

// TestDashboardInBrowser runs the dashboard in headless Chromium: sign in
// with a token, open a running replay from the list, see its steps arrive
// without a reload, reload and see the same steps, pause it, and see the
// pause in the Slack stand-in's thread, in the broker's counts and in the
// audit trail. A principal who may not read the DLQ sees neither the
// replay nor its buttons, and its forged pauses (no CSRF token, a wrong
// one, its own) change nothing; a viewer, whom the policy lets pull the
// brake but neither resume nor cancel, sees no Resume or Cancel button
// and its forged resumes change nothing.
// An agent checks the replay through MCP, a person in Slack, an OS user at
// the terminal. The trail's export is then checked against
// api/openapi.yaml: exactly the operations performed through the API,
// the dashboard, MCP, Slack and the terminal, in order, with their
// principals.
func TestDashboardInBrowser(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	e := newDashEnv(t)
	update := os.Getenv("DLQBOT_UPDATE_SCREENSHOT") == "1"
	src, dlq := testkit.Name("orders"), testkit.Name("orders-dlq")
	if update {
		src, dlq = "t-orders", "t-orders.dlq"
		testkit.DeleteQueue(src)
		testkit.DeleteQueue(dlq)
	}
	t.Cleanup(func() { testkit.DeleteQueue(src); testkit.DeleteQueue(dlq) })
	// Enough, at 5 a second, that the pause below comes before the last
	// is sent however slowly a loaded machine drives the browser (80 at
	// 10 a second were all sent once before the click).
	const total = 300
	e.rabbit.Topology(src, dlq, nil)
	e.rabbit.Reject(src, testkit.Msgs(total, 300)...)
	e.rabbit.WaitCount(dlq, total, 20*time.Second)
	e.rabbit.Consume(src, func(amqp091.Delivery) string { return "ack" })

	out := e.call(http.StatusCreated, tokRunbook, "POST", "/api/v1/previews", map[string]string{"selection": dlq})
	token, _ := out["token"].(string)
	rep := replayOf(t, e.call(http.StatusCreated, tokRunbook, "POST", "/api/v1/previews/"+token+"/approve",
		map[string]any{"step": 5, "cap": 10, "rate": 5}))
	t.Cleanup(func() { // end it, so the worker has nothing left to run
		(&apiEnv{env: e.env, url: e.url}).call(tokRunbook, "POST", "/api/v1/replays/"+rep.ID+"/cancel", nil)
	})

	b := newBrowser(t, chromium)
	b.step("open the dashboard", 15*time.Second, chromedp.Navigate(e.url+"/dashboard/"),
		chromedp.WaitVisible(chromedp.CSS("#signin")))
	b.step("sign in with the token", 15*time.Second, chromedp.SendKeys(chromedp.CSS("#token"), tokRunbook+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`#replays tr[data-replay="`+rep.ID+`"]`)))
	b.waitText("#who", "api:runbook", 5*time.Second)
	b.click("open the replay", `#replays tr[data-replay="`+rep.ID+`"] a`, 10*time.Second)
	b.step("the replay's page", 15*time.Second, chromedp.WaitVisible(chromedp.CSS(`#replay[data-id="`+rep.ID+`"]`)),
		chromedp.Evaluate[chromedp.Void](`window.dlqbotNoReload = true`))
	// A step that passes after the page loaded arrives through the event
	// stream: the script adds it (class "fresh"), the page is not reloaded.
	passed := len(b.lines("#steps li.ev-step_passed"))
	pctx, pcancel := context.WithTimeout(b.ctx, 65*time.Second)
	_, err := chromedp.Run(pctx, chromedp.Poll[bool](
		fmt.Sprintf(`document.querySelectorAll("#steps li.ev-step_passed").length > %d && document.querySelector("#steps li.fresh") !== null`, passed),
		chromedp.WithPollingTimeout(60*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
	pcancel()
	if err != nil {
		b.fail("a step arriving live", err)
	}
	if !b.eval(`window.dlqbotNoReload === true`) {
		b.fail("steps arriving", fmt.Errorf("the page was reloaded"))
	}
	b.shot("dashboard-replay-live")

	// An outsider, who may not read this DLQ (a plain HTTP client with a
	// session of its own): the list does not show the replay, its page is
	// refused, and forged pauses change nothing.
	outsider := newDashClient(t, e.url, tokOutsider)
	if list := outsider.get("/dashboard/", http.StatusOK); strings.Contains(list, rep.ID) {
		t.Errorf("the outsider's list shows %s", rep.ID)
	}
	page := outsider.get("/dashboard/replays/"+rep.ID, http.StatusNotFound)
	if strings.Contains(page, `data-verb=`) {
		t.Errorf("the outsider's page shows controls:\n%s", page)
	}
	csrf := csrfOf(t, page)
	for _, c := range []struct{ what, token string }{{"no CSRF token", ""}, {"a wrong CSRF token", strings.Repeat("0", 32)},
		{"its own CSRF token", csrf}} {
		if status := outsider.post("/dashboard/replays/"+rep.ID+"/pause", c.token); status != http.StatusForbidden {
			t.Errorf("the outsider's pause with %s: status %d, want 403", c.what, status)
		}
	}
	if r, err := e.store.Replays().Get(context.Background(), rep.ID); err != nil || r.State != engine.StateRunning {
		t.Fatalf("after the outsider's forged pauses the replay is %s (%v)", r.State, err)
	}

	before := b.lines("#steps li")
	b.step("reload", 15*time.Second, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#replay[data-id="`+rep.ID+`"]`)))
	after := b.lines("#steps li")
	for _, l := range before {
		if !strings.Contains(strings.Join(after, "\n"), l) {
			b.fail("the same steps after a reload", fmt.Errorf("%q is gone; after the reload: %q", l, after))
		}
	}
	b.click("click Pause", `#controls button[data-verb="pause"]`, 10*time.Second)
	b.step("the page after the pause", 15*time.Second, chromedp.WaitVisible(chromedp.CSS("#notice")),
		chromedp.WaitVisible(chromedp.CSS(`#replay[data-id="`+rep.ID+`"]`)))
	b.waitText("#state", "paused", 20*time.Second)
	b.waitText("#steps", "paused", 10*time.Second)
	b.step("the Resume button", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`#controls button[data-verb="resume"]`)))
	b.shot("dashboard-paused")

	// A viewer (read only) may pull the brake (the policy lets `read`
	// pause) but neither resume nor cancel (which needs `replay`): no
	// Resume or Cancel button on the paused replay, and a forged resume,
	// even with its own CSRF token, leaves the replay paused.
	viewer := newDashClient(t, e.url, tokViewer)
	page = viewer.get("/dashboard/replays/"+rep.ID, http.StatusOK)
	if strings.Contains(page, `data-verb="cancel"`) || strings.Contains(page, `data-verb="resume"`) {
		t.Errorf("the viewer's page of the paused replay: neither Cancel nor Resume expected:\n%s", page)
	}
	for _, c := range []struct{ what, token string }{{"no CSRF token", ""}, {"the outsider's CSRF token", csrf},
		{"its own CSRF token", csrfOf(t, page)}} {
		if status := viewer.post("/dashboard/replays/"+rep.ID+"/resume", c.token); status != http.StatusForbidden {
			t.Errorf("the viewer's resume with %s: status %d, want 403", c.what, status)
		}
	}

	// What the page says against the broker and the record: the DLQ holds
	// exactly what was not sent.
	r, err := e.store.Replays().Get(context.Background(), rep.ID)
	if err != nil || r.State != engine.StatePaused || r.Sent == 0 || r.Sent >= total {
		t.Fatalf("after the pause the record is %s with %d sent (%v)", r.State, r.Sent, err)
	}
	if got := b.text("#sent"); got != strconv.Itoa(r.Sent) {
		b.fail("the page's sent count", fmt.Errorf("page says %q, the record %d", got, r.Sent))
	}
	e.rabbit.WaitCount(dlq, total-r.Sent, 30*time.Second)
	testkit.Eventually(t, 20*time.Second, "the pause in the Slack thread", func() bool {
		_, thread, _, err := e.store.SlackRefs().Get(context.Background(), r.ID)
		return err == nil && thread != "" && strings.Contains(threadContent(e.thread(thread)), "Paused: "+strconv.Itoa(r.Sent))
	})

	// An agent checks it through MCP (reads the DLQ, changes nothing).
	session, _, err := mcpClient(t, e.url+"/mcp", tokAgent)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	var check engine.CheckReport
	if msg := callTool(t, session, "dlq_check", map[string]any{"replay_id": rep.ID}, &check); msg != "" || check.Replayed != r.Sent || check.Returned != 0 {
		t.Fatalf("dlq_check: %q %+v (sent %d)", msg, check, r.Sent)
	}

	// A person checks it in Slack, and OS user oncall at the terminal (the
	// terminal's caller, as `dlqbot check` makes it, on the same
	// operations). The Slack command answers before its check is
	// recorded: wait for the entry.
	e.command("U0BOB00001", "check "+rep.ID)
	testkit.Eventually(t, 30*time.Second, "the Slack check in the trail", func() bool {
		es, err := e.store.Audit().List(context.Background(), audit.Filter{FrontEnd: ops.FrontSlack, Op: audit.OpCheck})
		return err == nil && len(es) == 1
	})
	if _, err := e.ops.Check(context.Background(), ops.TerminalCaller(e.ops.Policy(), "oncall"), rep.ID); err != nil {
		t.Fatalf("the terminal's check: %v", err)
	}

	b.step("open the audit trail", 15*time.Second, chromedp.Navigate(e.url+"/dashboard/audit?op=pause"),
		chromedp.WaitVisible(chromedp.CSS("#audit")))
	b.waitText("#audit", "dashboard", 5*time.Second)
	if got := b.text("#audit"); !strings.Contains(got, "runbook") || !strings.Contains(got, "refused forbidden") || !strings.Contains(got, rep.ID) {
		b.fail("the pause in the audit trail", fmt.Errorf("%q", got))
	}
	b.shot("dashboard-audit")
	b.step("the dashboard's front page", 15*time.Second, chromedp.Navigate(e.url+"/dashboard/"),
		chromedp.WaitVisible(chromedp.CSS(`#dlqs tr[data-dlq="`+dlq+`"]`)))
	row := b.text(`#dlqs tr[data-dlq="` + dlq + `"]`)
	if cells := strings.Fields(row); len(cells) < 3 || cells[1] != strconv.Itoa(e.rabbit.Count(dlq)) || cells[1] != strconv.Itoa(total-r.Sent) {
		b.fail("the DLQ's row", fmt.Errorf("%q: want %d ready (the broker counts %d)", row, total-r.Sent, e.rabbit.Count(dlq)))
	}
	path := b.shot("dashboard")
	if update {
		png, err := os.ReadFile(path)
		if err == nil {
			err = os.WriteFile(filepath.Join("..", "docs", "dashboard.png"), png, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Log("updated docs/dashboard.png")
	}

	// The export: exactly what was done, in order, each line valid
	// against the OpenAPI schema.
	entries := e.exportAudit(t, tokRunbook, "")
	want := []string{
		"api:runbook api preview ok",
		"api:runbook api approve ok",
		"api:outsider dashboard pause refused forbidden",
		"api:runbook dashboard pause ok",
		"api:viewer dashboard resume refused forbidden",
		"api:agent mcp check ok",
		"U0BOB00001 slack check ok",
		"terminal:oncall terminal check ok",
	}
	var got []string
	for _, en := range entries {
		got = append(got, strings.TrimSpace(en.Identity+" "+en.FrontEnd+" "+en.Op+" "+en.Outcome+" "+en.Code))
		if en.Op != audit.OpPreview && en.ReplayID != rep.ID || en.DLQ != dlq {
			t.Errorf("entry %+v: not about %s on %s", en, rep.ID, dlq)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the audit trail:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if entries[0].TokenRef != audit.TokenRef(token) || entries[0].Messages != total || strings.Contains(fmt.Sprint(entries), token) {
		t.Errorf("the preview's entry names the token wrongly: %+v", entries[0])
	}
	if paused := e.exportAudit(t, tokViewer, "?op=pause&outcome=ok"); len(paused) != 1 || paused[0].Principal != "runbook" {
		t.Errorf("the viewer's filtered export: %+v", paused)
	}
}

// exportAudit reads GET /api/v1/audit as tok and checks every line
// against the AuditEntry schema of api/openapi.yaml.
func (d *dashEnv) exportAudit(t *testing.T, tok, query string) []audit.Entry {
	t.Helper()
	schema := auditSchema(t)
	req, _ := http.NewRequest("GET", d.url+"/api/v1/audit"+query, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /api/v1/audit: %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var out []audit.Entry
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var doc any
		if err := json.Unmarshal(sc.Bytes(), &doc); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if err := schema.Validate(doc); err != nil {
			t.Errorf("line %s does not match the AuditEntry schema: %v", sc.Text(), err)
		}
		var e audit.Entry
		_ = json.Unmarshal(sc.Bytes(), &e)
		out = append(out, e)
	}
	return out
}

// auditSchema is api/openapi.yaml's AuditEntry, resolved.
func auditSchema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "api", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(doc.Components.Schemas["AuditEntry"])
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("AuditEntry schema: %v", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("AuditEntry schema: %v", err)
	}
	return rs
}

// threadContent is what a reader sees in a message's thread.
func threadContent(m slackstub.Message) string {
	var b strings.Builder
	b.WriteString(m.Content())
	for _, r := range m.Replies {
		b.WriteString("\n" + r.Content())
	}
	return b.String()
}

// eval evaluates a boolean expression on the page.
func (b *browser) eval(expr string) bool {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	v, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
	return v
}

// lines returns the visible text of each element sel matches.
func (b *browser) lines(sel string) []string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	v, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		fmt.Sprintf(`[...document.querySelectorAll(%s)].map(e => e.innerText)`, strconv.Quote(sel))))
	return v
}

// dashClient is a signed-in dashboard session outside the browser.
type dashClient struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newDashClient(t *testing.T, base, tok string) *dashClient {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(base+"/dashboard/signin", url.Values{"token": {tok}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: status %d", resp.StatusCode)
	}
	return &dashClient{t: t, base: base, c: c}
}

// csrfOf returns the CSRF token of a dashboard page.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the page:\n%s", page)
	}
	return m[1]
}

func (d *dashClient) get(path string, want int) string {
	d.t.Helper()
	resp, err := d.c.Get(d.base + path)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		d.t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, body)
	}
	return string(body)
}

func (d *dashClient) post(path, csrf string) int {
	d.t.Helper()
	v := url.Values{}
	if csrf != "" {
		v.Set("csrf", csrf)
	}
	resp, err := d.c.PostForm(d.base+path, v)
	if err != nil {
		d.t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
