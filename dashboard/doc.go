// Package dashboard serves dlqbot's web dashboard at /dashboard/: every
// replay on one page (newest first, filterable by state and DLQ), a
// replay's page whose steps arrive live through the replay's event stream
// (server-sent events, resumed with Last-Event-ID) and survive a reload,
// under what its preview found (Backend.Preview: the problems first, then
// the targets with their consumers' verdicts), the DLQs the signed-in person may read, the DLQ watch's open alerts of
// those DLQs (pages.go, Deps.Alerts), and the audit trail.
//
// The pages are server-rendered html/template with a little JavaScript for
// live updates; templates, style sheet and script are embedded (embed.FS),
// with no build step and nothing loaded from elsewhere.
//
// Sign-in is by an API principal's token (a form; the session is a signed
// cookie: HttpOnly, Secure over TLS, SameSite=Strict) or, where the
// operator configures trusted proxy addresses, by the identity header of an
// oauth2-proxy in front (X-Forwarded-Email, else X-Forwarded-User), mapped
// to the principal whose emails list it in the permissions file. Every
// form that changes something carries a per-session CSRF token, checked on
// POST. Without a permissions file the dashboard is off and says how to
// turn it on.
//
// The dashboard decides nothing about permissions: what a person sees and
// may do is what its Backend (the operations every front end shares)
// answers for that principal; buttons are shown only where the Backend
// allows the action, and the Backend decides again when it is posted.
//
// Files:
//
//	dashboard.go  Config, Deps, New and the handler
//	backend.go    Backend, what the dashboard asks of the operations layer
//	              (dashapi implements it)
//	auth.go       sessions and how a person signed in; signin.go the
//	              sign-in, its throttle and signed-out sessions
//	pages.go      the pages and what each template is given; funcs.go
//	              the templates' helpers
package dashboard
