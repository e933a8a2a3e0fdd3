package dashboard

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/netip"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// Defaults for Config.
const (
	DefaultSessionTTL = 12 * time.Hour
	DefaultListSize   = 50
)

// Config configures the dashboard. Zero values mean the documented
// defaults.
type Config struct {
	// Policy is the permissions file; nil turns the dashboard off (every
	// page says how to turn it on).
	Policy *commands.Policy
	// SessionKey signs session cookies and CSRF tokens
	// (DLQBOT_DASHBOARD_SESSION_KEY); at least 32 bytes. Empty: a random
	// key per process, so sessions end when it restarts and hold on this
	// replica only.
	SessionKey []byte
	// SessionTTL is how long a sign-in lasts; default 12h.
	SessionTTL time.Duration
	// TrustedProxies are the addresses whose X-Forwarded-Email /
	// X-Forwarded-User headers sign people in
	// (DLQBOT_DASHBOARD_TRUSTED_PROXIES); none by default, and the headers
	// are ignored from anywhere else.
	TrustedProxies []netip.Prefix
	// SlackURL is the Slack workspace's address (https://acme.slack.com),
	// for links to a replay's thread; empty: the thread is named, not
	// linked.
	SlackURL string
	// ListSize is how many replays the list shows; default 50.
	ListSize int
	// SignInFailures is how many failed sign-ins one client address may
	// make within SignInWindow before its sign-ins are refused (429)
	// until the window passes; default 5, negative turns the throttle
	// off. SignInWindow defaults to a minute.
	SignInFailures int
	SignInWindow   time.Duration
	// SignInNote, when set, is what the sign-in page says about where
	// the token comes from (the demo's, which has no permissions file);
	// empty: the token of one's principal in the permissions file.
	SignInNote string
}

// Deps are the dashboard's collaborators.
type Deps struct {
	Backend Backend
	// Threads tells where a replay shows in Slack (the Slack front end's
	// record, store.SlackRefs); optional: without it no thread is linked.
	Threads Threads
	// Revocations records signed-out sessions; optional: without it a
	// sign-out is remembered by this process only (enough with the
	// default per-process session key).
	Revocations Revocations
	// Sessions records sign-ins (done or refused) and sign-outs in the
	// audit trail (*ops.Ops implements it); optional: without it they are
	// logged only.
	Sessions Sessions
	// Alerts lists the DLQ watch's open alerts (the store's Alerts);
	// optional: without it the index shows none.
	Alerts Alerts
	Log    zerolog.Logger
	// Now tells the time; nil means time.Now.
	Now func() time.Time
}

// Alerts lists the DLQ watch's open alerts.
type Alerts interface {
	List(ctx context.Context) ([]engine.AlertRecord, error)
}

// Sessions records a session's start or end: op audit.OpSignIn or
// audit.OpSignOut, done for principal when code is "", refused with code
// otherwise.
type Sessions interface {
	RecordSession(ctx context.Context, frontEnd, principal, op, code, detail string)
}

// Threads reads where a replay shows in Slack; *store.SlackRefs
// implements it.
type Threads interface {
	Get(ctx context.Context, id string) (channel, thread, progress string, err error)
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Dashboard serves the pages. It is safe for concurrent use.
type Dashboard struct {
	cfg   Config
	d     Deps
	log   zerolog.Logger
	key   []byte
	now   func() time.Time
	pages map[string]*template.Template
	// signins throttles failed sign-ins per client address.
	signins *throttle
}

// New validates cfg and deps and returns a Dashboard.
func New(cfg Config, d Deps) (*Dashboard, error) {
	if d.Backend == nil && cfg.Policy != nil {
		return nil, errors.New("dashboard: new: a backend is required")
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.ListSize <= 0 {
		cfg.ListSize = DefaultListSize
	}
	key := cfg.SessionKey
	switch {
	case len(key) == 0:
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	case len(key) < 32:
		return nil, errors.New("dashboard: new: the session key must be at least 32 bytes")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Revocations == nil {
		d.Revocations = newMemRevocations(d.Now)
	}
	if cfg.SignInFailures == 0 {
		cfg.SignInFailures = DefaultSignInFailures
	}
	if cfg.SignInWindow <= 0 {
		cfg.SignInWindow = DefaultSignInWindow
	}
	db := &Dashboard{cfg: cfg, d: d, log: d.Log.With().Str("component", "dashboard").Logger(), key: key, now: d.Now,
		pages: map[string]*template.Template{}, signins: newThrottle(cfg.SignInFailures, cfg.SignInWindow, d.Now)}
	for _, page := range []string{"off.html", "signin.html", "index.html", "replay.html", "audit.html", "error.html"} {
		t, err := template.New(page).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html", "templates/"+page)
		if err != nil {
			return nil, err
		}
		db.pages[page] = t
	}
	return db, nil
}

// Handler serves the dashboard under /dashboard/; mount it with
// mux.Handle("/dashboard/", d.Handler()).
func (d *Dashboard) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /dashboard/static/", http.StripPrefix("/dashboard/static/", http.FileServerFS(static)))
	if d.cfg.Policy == nil {
		mux.HandleFunc("/dashboard/", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/dashboard/static/" {
				d.render(w, http.StatusNotFound, "off.html", page{Title: "Dashboard off"})
			}
		})
		return headers(mux)
	}
	mux.HandleFunc("GET /dashboard/signin", d.signinPage)
	mux.HandleFunc("POST /dashboard/signin", d.signin)
	mux.HandleFunc("POST /dashboard/signout", d.auth(d.signout))
	mux.HandleFunc("GET /dashboard/{$}", d.auth(d.index))
	mux.HandleFunc("GET /dashboard/replays/{id}", d.auth(d.replay))
	mux.HandleFunc("GET /dashboard/replays/{id}/events", d.auth(d.events))
	mux.HandleFunc("POST /dashboard/replays/{id}/{verb}", d.auth(d.control))
	mux.HandleFunc("GET /dashboard/audit", d.auth(d.audit))
	mux.HandleFunc("/dashboard/", func(w http.ResponseWriter, r *http.Request) {
		d.render(w, http.StatusNotFound, "error.html", page{Title: "Not found", Error: "There is no such page in the dashboard."})
	})
	return headers(mux)
}

// headers adds the headers every page carries: no framing by other sites,
// no inline code from elsewhere, no caching of signed-in pages.
func headers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "same-origin")
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// auth runs h for a signed-in person; others are sent to the sign-in page
// (a GET) or refused (401).
func (d *Dashboard) auth(h func(http.ResponseWriter, *http.Request, session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := d.signedIn(r)
		if !ok {
			if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" {
				http.Redirect(w, r, "/dashboard/signin", http.StatusSeeOther)
				return
			}
			d.render(w, http.StatusUnauthorized, "error.html", page{Title: "Signed out", Error: "Sign in first; nothing was done."})
			return
		}
		if r.Method == http.MethodPost && !d.checkPost(r, s) {
			d.log.Warn().Str("principal", s.p.Name).Str("path", r.URL.Path).Str("remote", r.RemoteAddr).Msg("dashboard: a POST without this session's CSRF token was refused")
			d.render(w, http.StatusForbidden, "error.html", page{Title: "Refused", Who: s.p.ID(), CSRF: s.csrf,
				Error: "This request did not come from a dashboard page of this session (its CSRF token is missing or wrong), so nothing was done. Reload the page and try again."})
			return
		}
		h(w, r.WithContext(withVia(r.Context(), s.via)), s)
	}
}

// render writes a page.
func (d *Dashboard) render(w http.ResponseWriter, status int, name string, p page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	p.SignInNote = d.cfg.SignInNote
	if err := d.pages[name].ExecuteTemplate(w, "layout", p); err != nil {
		d.log.Error().Err(err).Str("page", name).Msg("dashboard: render")
	}
}
