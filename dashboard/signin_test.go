package dashboard

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// TestSignOutRevokesTheSession: after signing out, the session's cookie —
// still correctly signed and unexpired, as a copy of it would be — signs
// nobody in, on this dashboard and on another replica sharing the key and
// the revocations; another session of the same principal goes on. (Before,
// sign-out only asked the browser to forget the cookie.)
func TestSignOutRevokesTheSession(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("k", 32))
	revs := newMemRevocations(time.Now)
	mk := func() http.Handler {
		d, err := New(Config{Policy: testPolicy(t), SessionKey: key}, Deps{Backend: &fakeBackend{}, Revocations: revs})
		if err != nil {
			t.Fatal(err)
		}
		return d.Handler()
	}
	h, replica := mk(), mk()
	c, other := signIn(t, h, tokOps), signIn(t, h, tokOps)
	page := get(h, "http://dlqbot.test/dashboard/", c)
	if page.Code != http.StatusOK {
		t.Fatalf("signed in: %d", page.Code)
	}
	if w := get(replica, "http://dlqbot.test/dashboard/", c); w.Code != http.StatusOK {
		t.Fatalf("the replica before the sign-out: %d", w.Code)
	}
	r := form("http://dlqbot.test/dashboard/signout", url.Values{"csrf": {csrfField.FindStringSubmatch(page.Body.String())[1]}})
	r.AddCookie(c)
	if w := do(h, r); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/dashboard/signin" {
		t.Fatalf("sign-out: %d to %q", w.Code, w.Header().Get("Location"))
	}
	for name, hh := range map[string]http.Handler{"here": h, "the replica": replica} {
		if w := get(hh, "http://dlqbot.test/dashboard/", c); w.Code != http.StatusSeeOther {
			t.Errorf("the signed-out cookie %s: status %d, want a redirect to sign in", name, w.Code)
		}
	}
	r = form("http://dlqbot.test/dashboard/replays/"+running.ID+"/pause", url.Values{"csrf": {csrfField.FindStringSubmatch(page.Body.String())[1]}})
	r.AddCookie(c)
	if w := do(h, r); w.Code != http.StatusUnauthorized {
		t.Errorf("a POST with the signed-out cookie: status %d", w.Code)
	}
	if w := get(h, "http://dlqbot.test/dashboard/", other); w.Code != http.StatusOK {
		t.Errorf("the principal's other session: status %d", w.Code)
	}
}

// TestSignInThrottled: after 5 failed sign-ins within a minute from one
// address, its sign-ins — even with a right token — are refused with 429,
// a sentence and Retry-After, and no session; another address signs in;
// once the minute has passed the first may again. Behind a trusted proxy
// the client it names is counted, not the proxy.
func TestSignInThrottled(t *testing.T) {
	t.Parallel()
	now := time.Now()
	d, err := New(Config{Policy: testPolicy(t), TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}},
		Deps{Backend: &fakeBackend{}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler()
	try := func(remote, xff, tok string) (int, string, bool, string) {
		r := form("http://dlqbot.test/dashboard/signin", url.Values{"token": {tok}})
		r.RemoteAddr = remote
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		w := do(h, r)
		return w.Code, w.Body.String(), len(w.Result().Cookies()) > 0, w.Header().Get("Retry-After")
	}
	for i := range 5 {
		if code, _, _, _ := try("192.0.2.7:1000", "", "wrong-token"); code != http.StatusUnauthorized {
			t.Fatalf("failure %d: status %d", i+1, code)
		}
	}
	code, body, cookie, retry := try("192.0.2.7:1001", "", tokOps)
	if code != http.StatusTooManyRequests || cookie || retry == "" || !strings.Contains(body, "Too many failed sign-ins") {
		t.Fatalf("the sixth attempt: status %d, cookie %v, Retry-After %q", code, cookie, retry)
	}
	if code, _, cookie, _ := try("192.0.2.8:1000", "", tokOps); code != http.StatusSeeOther || !cookie {
		t.Errorf("another address: status %d, cookie %v", code, cookie)
	}
	for range 5 {
		try("10.0.0.9:1000", "198.51.100.1, 203.0.113.5", "wrong-token")
	}
	if code, _, _, _ := try("10.0.0.9:1000", "203.0.113.5", tokOps); code != http.StatusTooManyRequests {
		t.Errorf("the client behind the proxy after 5 failures: status %d", code)
	}
	if code, _, _, _ := try("10.0.0.9:1000", "203.0.113.6", tokOps); code != http.StatusSeeOther {
		t.Errorf("another client behind the same proxy: status %d", code)
	}
	now = now.Add(time.Minute + time.Second)
	if code, _, cookie, _ := try("192.0.2.7:1002", "", tokOps); code != http.StatusSeeOther || !cookie {
		t.Errorf("after the minute: status %d, cookie %v", code, cookie)
	}
}

// TestDoneIsNotReflected: the replay page's notice after a control comes
// from a fixed set of keys and the replay's own state; any other ?done=
// text never reaches the page.
func TestDoneIsNotReflected(t *testing.T) {
	t.Parallel()
	h, _ := newTestDashboard(t, Config{Policy: testPolicy(t)})
	c := signIn(t, h, tokOps)
	base := "http://dlqbot.test/dashboard/replays/" + running.ID
	evil := "Replay cancelled. Call +1 555 0100 to restore it"
	body := get(h, base+"?done="+url.QueryEscape(evil), c).Body.String()
	if strings.Contains(body, "555 0100") || strings.Contains(body, "restore it") {
		t.Errorf("the page reflects ?done= text:\n%s", body)
	}
	body = get(h, base+"?done=pause", c).Body.String()
	if !strings.Contains(body, "Asked to pause it; it is running now.") {
		t.Errorf("the pause notice is missing:\n%s", body)
	}
}

// viaBackend is the fake backend, keeping how the person behind each
// Replays call signed in.
type viaBackend struct {
	*fakeBackend
	vias []string
}

func (v *viaBackend) Replays(ctx context.Context, p commands.Principal, n int) ([]engine.Replay, error) {
	v.mu.Lock()
	v.vias = append(v.vias, SignedInVia(ctx))
	v.mu.Unlock()
	return v.fakeBackend.Replays(ctx, p, n)
}

// TestBackendKnowsHowThePersonSignedIn: the backend is told whether a
// person signed in with a token or through the trusted proxy (a proxy's
// person is not a caller with a bearer token, for "needs a human"); a
// context that does not say counts as a token.
func TestBackendKnowsHowThePersonSignedIn(t *testing.T) {
	t.Parallel()
	vb := &viaBackend{fakeBackend: &fakeBackend{}}
	d, err := New(Config{Policy: testPolicy(t), TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}, Deps{Backend: vb})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler()
	get(h, "http://dlqbot.test/dashboard/", signIn(t, h, tokOps))
	r := httptest.NewRequest("GET", "http://dlqbot.test/dashboard/", nil)
	r.RemoteAddr = "10.0.0.9:5555"
	r.Header.Set(HeaderEmail, "ops@example.com")
	do(h, r)
	vb.mu.Lock()
	defer vb.mu.Unlock()
	if len(vb.vias) != 2 || vb.vias[0] != ViaToken || vb.vias[1] != ViaProxy {
		t.Fatalf("the backend was told %q, want token then proxy", vb.vias)
	}
	if SignedInVia(context.Background()) != ViaToken {
		t.Fatal("a context that does not say is not a token")
	}
}
