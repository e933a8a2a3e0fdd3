package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

const (
	tokOps    = "tok-ops-0123456789"
	tokViewer = "tok-viewer-0123456789"
)

func testPolicy(t *testing.T) *commands.Policy {
	t.Helper()
	p, err := commands.ParsePolicy([]byte(`
principals:
  - name: ops
    token_sha256: ` + commands.HashToken(tokOps) + `
    emails: [ops@example.com]
  - name: viewer
    token_sha256: ` + commands.HashToken(tokViewer) + `
roles:
  - name: ops
    principals: [ops]
    grants: [{queues: ["*"], actions: [read, replay, publish]}]
  - name: viewers
    principals: [viewer]
    grants: [{queues: ["*"], actions: [read]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeBackend stands in for the operations layer: ops may control, the
// viewer may not; it records the controls it was asked for.
type fakeBackend struct {
	mu       sync.Mutex
	controls []string
}

var running = engine.Replay{ID: "r_0123456789abcdef", DLQ: "orders.dlq", State: engine.StateRunning, Total: 50, Sent: 10}

func (f *fakeBackend) Replays(context.Context, commands.Principal, int) ([]engine.Replay, error) {
	return []engine.Replay{running}, nil
}
func (f *fakeBackend) Replay(_ context.Context, _ commands.Principal, id string) (engine.Replay, error) {
	if id != running.ID {
		return engine.Replay{}, errors.New("there is no such replay")
	}
	return running, nil
}
func (f *fakeBackend) Preview(context.Context, commands.Principal, string) (*engine.PreviewCard, error) {
	return nil, nil
}
func (f *fakeBackend) Events(context.Context, commands.Principal, string) ([]string, []engine.Event, error) {
	return nil, nil, nil
}
func (f *fakeBackend) ServeEvents(w http.ResponseWriter, _ *http.Request, _ commands.Principal, _, _ string) {
	w.WriteHeader(http.StatusNoContent)
}
func (f *fakeBackend) MayControl(_ context.Context, p commands.Principal, _ string, _ engine.Replay) bool {
	return p.Name == "ops"
}
func (f *fakeBackend) Control(_ context.Context, p commands.Principal, verb, id string) (engine.Replay, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.controls = append(f.controls, p.Name+" "+verb+" "+id)
	if p.Name != "ops" {
		return engine.Replay{}, &commands.ForbiddenError{Reason: "You may not control replays of orders.dlq."}
	}
	r := running
	r.State = engine.StatePaused
	return r, nil
}
func (f *fakeBackend) DLQs(context.Context, commands.Principal) ([]DLQ, error) {
	return []DLQ{{Name: "orders.dlq", Exists: true, Ready: 40, Depths: []int{0, 3, 1}}}, nil
}
func (f *fakeBackend) Audit(context.Context, commands.Principal, audit.Filter) ([]audit.Entry, error) {
	return nil, nil
}

func (f *fakeBackend) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.controls...)
}

func newTestDashboard(t *testing.T, cfg Config) (http.Handler, *fakeBackend) {
	t.Helper()
	fb := &fakeBackend{}
	d, err := New(cfg, Deps{Backend: fb})
	if err != nil {
		t.Fatal(err)
	}
	return d.Handler(), fb
}

func do(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func form(target string, v url.Values) *http.Request {
	r := httptest.NewRequest("POST", target, strings.NewReader(v.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return r
}

// signIn signs in with tok and returns the session cookie.
func signIn(t *testing.T, h http.Handler, tok string) *http.Cookie {
	t.Helper()
	w := do(h, form("http://dlqbot.test/dashboard/signin", url.Values{"token": {tok}}))
	for _, c := range w.Result().Cookies() {
		if c.Name == SessionCookie && c.Value != "" {
			return c
		}
	}
	t.Fatalf("sign-in with %q set no session cookie (status %d)", tok, w.Code)
	return nil
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func get(h http.Handler, target string, c *http.Cookie) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", target, nil)
	if c != nil {
		r.AddCookie(c)
	}
	return do(h, r)
}

func TestDashboardOffWithoutPermissions(t *testing.T) {
	t.Parallel()
	h, _ := newTestDashboard(t, Config{})
	for _, path := range []string{"/dashboard/", "/dashboard/replays/r_1", "/dashboard/signin"} {
		w := get(h, "http://dlqbot.test"+path, nil)
		if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "DLQBOT_PERMISSIONS") {
			t.Errorf("%s: status %d, body does not say how to turn it on", path, w.Code)
		}
	}
	if w := do(h, form("http://dlqbot.test/dashboard/signin", url.Values{"token": {tokOps}})); w.Code != http.StatusNotFound || len(w.Result().Cookies()) > 0 {
		t.Errorf("sign-in while off: status %d, cookies %v", w.Code, w.Result().Cookies())
	}
}

// TestSignInCookie: a wrong token gets no session; a right one a cookie
// that is HttpOnly, SameSite=Strict, scoped to /dashboard/ and Secure
// over TLS only; a tampered cookie signs nobody in.
func TestSignInCookie(t *testing.T) {
	t.Parallel()
	h, _ := newTestDashboard(t, Config{Policy: testPolicy(t)})
	if w := get(h, "http://dlqbot.test/dashboard/", nil); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/dashboard/signin" {
		t.Errorf("signed out: status %d to %q", w.Code, w.Header().Get("Location"))
	}
	w := do(h, form("http://dlqbot.test/dashboard/signin", url.Values{"token": {tokOps + "x"}}))
	if w.Code != http.StatusUnauthorized || len(w.Result().Cookies()) > 0 {
		t.Errorf("a wrong token: status %d, cookies %v", w.Code, w.Result().Cookies())
	}
	c := signIn(t, h, tokOps)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/dashboard/" || c.Secure {
		t.Errorf("cookie over plain HTTP: %+v", c)
	}
	w = do(h, form("https://dlqbot.test/dashboard/signin", url.Values{"token": {tokOps}}))
	if cs := w.Result().Cookies(); len(cs) != 1 || !cs[0].Secure || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie over TLS: %+v", cs)
	}
	page := get(h, "http://dlqbot.test/dashboard/", c)
	if page.Code != http.StatusOK || !strings.Contains(page.Body.String(), "api:ops") || !strings.Contains(page.Body.String(), running.ID) {
		t.Fatalf("signed in: status %d\n%s", page.Code, page.Body.String())
	}
	if csp := page.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("content security policy %q", csp)
	}
	forged := *c
	forged.Value = strings.Replace(c.Value, ".", "x.", 1)
	if w := get(h, "http://dlqbot.test/dashboard/", &forged); w.Code != http.StatusSeeOther {
		t.Errorf("a tampered cookie: status %d", w.Code)
	}
	// A session signed by another process's key is not valid here.
	other, _ := newTestDashboard(t, Config{Policy: testPolicy(t)})
	if w := get(other, "http://dlqbot.test/dashboard/", c); w.Code != http.StatusSeeOther {
		t.Errorf("another key's cookie: status %d", w.Code)
	}
}

// TestProxyHeader: oauth2-proxy's identity header signs a person in only
// from a trusted address, and only as the principal whose emails list it.
func TestProxyHeader(t *testing.T) {
	t.Parallel()
	h, _ := newTestDashboard(t, Config{Policy: testPolicy(t), TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}})
	req := func(remote, header, value string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "http://dlqbot.test/dashboard/", nil)
		r.RemoteAddr = remote
		r.Header.Set(header, value)
		return do(h, r)
	}
	if w := req("192.0.2.7:5555", HeaderEmail, "ops@example.com"); w.Code != http.StatusSeeOther {
		t.Errorf("the header from an untrusted address: status %d (signed in)", w.Code)
	}
	if w := req("10.0.0.9:5555", HeaderEmail, "OPS@example.com"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "api:ops") {
		t.Errorf("the header from the proxy: status %d", w.Code)
	}
	if w := req("10.0.0.9:5555", HeaderUser, "ops@example.com"); w.Code != http.StatusOK {
		t.Errorf("X-Forwarded-User from the proxy: status %d", w.Code)
	}
	if w := req("10.0.0.9:5555", HeaderEmail, "eve@example.com"); w.Code != http.StatusSeeOther {
		t.Errorf("an unknown identity from the proxy: status %d", w.Code)
	}
}

// TestControlNeedsCSRFAndPolicy: a pause posted without the session's CSRF
// token or with a wrong one is refused before the backend hears of it; the
// viewer's page has no Pause button, and its POST with the right token is
// refused by the backend; ops's pause goes through.
func TestControlNeedsCSRFAndPolicy(t *testing.T) {
	t.Parallel()
	h, fb := newTestDashboard(t, Config{Policy: testPolicy(t)})
	target := "http://dlqbot.test/dashboard/replays/" + running.ID + "/pause"
	post := func(c *http.Cookie, csrf string) *httptest.ResponseRecorder {
		v := url.Values{}
		if csrf != "" {
			v.Set("csrf", csrf)
		}
		r := form(target, v)
		r.AddCookie(c)
		return do(h, r)
	}
	ops, viewer := signIn(t, h, tokOps), signIn(t, h, tokViewer)
	opsPage := get(h, "http://dlqbot.test/dashboard/replays/"+running.ID, ops).Body.String()
	if !strings.Contains(opsPage, `data-verb="pause"`) {
		t.Fatalf("ops sees no Pause button:\n%s", opsPage)
	}
	viewerPage := get(h, "http://dlqbot.test/dashboard/replays/"+running.ID, viewer).Body.String()
	if strings.Contains(viewerPage, `data-verb=`) || !strings.Contains(viewerPage, running.ID) {
		t.Errorf("the viewer's page shows controls:\n%s", viewerPage)
	}
	viewerCSRF := csrfField.FindStringSubmatch(viewerPage)[1]
	opsCSRF := csrfField.FindStringSubmatch(opsPage)[1]
	if w := post(ops, ""); w.Code != http.StatusForbidden {
		t.Errorf("no CSRF token: status %d", w.Code)
	}
	if w := post(ops, viewerCSRF); w.Code != http.StatusForbidden {
		t.Errorf("another session's CSRF token: status %d", w.Code)
	}
	if got := fb.calls(); len(got) != 0 {
		t.Fatalf("the backend was asked despite the CSRF refusals: %v", got)
	}
	if w := post(viewer, viewerCSRF); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "may not") {
		t.Errorf("the viewer's pause: status %d\n%s", w.Code, w.Body.String())
	}
	r := form(target, url.Values{"csrf": {opsCSRF}})
	r.AddCookie(ops)
	r.Header.Set("Origin", "https://evil.example")
	if w := do(h, r); w.Code != http.StatusForbidden {
		t.Errorf("a cross-site POST with the right token: status %d", w.Code)
	}
	if w := post(ops, opsCSRF); w.Code != http.StatusSeeOther || !strings.HasSuffix(w.Header().Get("Location"), "?done=pause") {
		t.Errorf("ops's pause: status %d, to %q", w.Code, w.Header().Get("Location"))
	}
	if got := fb.calls(); len(got) != 2 || got[0] != "viewer pause "+running.ID || got[1] != "ops pause "+running.ID {
		t.Errorf("backend calls %v", got)
	}
}

func TestSessionExpires(t *testing.T) {
	t.Parallel()
	now := time.Now()
	fb := &fakeBackend{}
	d, err := New(Config{Policy: testPolicy(t), SessionTTL: time.Hour}, Deps{Backend: fb, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler()
	c := signIn(t, h, tokOps)
	if w := get(h, "http://dlqbot.test/dashboard/", c); w.Code != http.StatusOK {
		t.Fatalf("fresh session: %d", w.Code)
	}
	now = now.Add(time.Hour + time.Second)
	if w := get(h, "http://dlqbot.test/dashboard/", c); w.Code != http.StatusSeeOther {
		t.Errorf("expired session: status %d", w.Code)
	}
}
