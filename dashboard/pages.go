package dashboard

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// page is what every template gets.
type page struct {
	Title string
	// Who is the signed-in identity ("" when signed out); CSRF its forms'
	// token.
	Who, CSRF string
	Error     string
	Notice    string
	// SignInNote is Config.SignInNote.
	SignInNote string

	// index
	Replays     []replayView
	States      []string
	State, DLQ  string
	DLQNames    []string
	DLQs        []dlqView
	Alerts      []engine.AlertRecord
	Audit       []audit.Entry
	AuditFilter auditFilterView

	// replay
	R         *replayView
	Preview   *previewView
	Steps     []stepView
	Returns   []returnGroup
	FollowUps []followUp
	LastEvent string
}

// replayView is a replay with what its row and page show.
type replayView struct {
	engine.Replay
	Controls []control
	Thread   string // link to the Slack thread, when known
	Where    string // where it shows in Slack, in words
	Live     bool   // its events may still arrive
}

// control is a button the policy allows for the replay in its state.
type control struct {
	Verb, Label string
	Danger      bool
}

// previewView is what the preview a replay was approved from found, as
// its token keeps it (engine.PreviewCard): its problems first, in the
// words of Slack's preview, then its targets with their consumers'
// verdicts. Verdict is its headline, counted as every front end counts
// it (engine.Warnings): "Safe to replay" or "N problems", failures still
// arriving among them. Note says why there is nothing to show ("" when
// there is).
type previewView struct {
	Verdict  string
	Warnings int
	Problems []problemView
	Targets  []engine.TargetView
	More     int // targets beyond those listed
	Note     string
}

// problemView is one thing the preview said would go wrong: its Title,
// then its Queue (when the words name one) and its Text.
type problemView struct {
	Kind               engine.ProblemKind
	Title, Queue, Text string
}

// maxPreviewTargets is how many targets the replay's page lists.
const maxPreviewTargets = 50

type stepView struct {
	At   time.Time
	Kind string
	Text string
	Step *engine.StepResult
}

type returnGroup struct {
	Reason string
	Count  int
}

type followUp struct {
	At    time.Time
	Label string
	Check *engine.CheckReport
}

type dlqView struct {
	DLQ
	Spark template.HTML
	Peak  int
}

type auditFilterView struct {
	Principal, FrontEnd, Op, Outcome, DLQ, ReplayID, Since string
}

var states = []string{"queued", "running", "paused", "stopped", "cancelled", "finished", "interrupted"}

func (d *Dashboard) signinPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := d.signedIn(r); ok {
		http.Redirect(w, r, "/dashboard/", http.StatusSeeOther)
		return
	}
	d.render(w, http.StatusOK, "signin.html", page{Title: "Sign in", Notice: d.proxyNotice()})
}

func (d *Dashboard) proxyNotice() string {
	if len(d.cfg.TrustedProxies) > 0 {
		return "Or come through the sign-in proxy in front of dlqbot: it names you to the dashboard."
	}
	return ""
}

// signin exchanges a principal's token for a session cookie. A client
// address with too many failed sign-ins lately is refused (429) without
// its token being looked at.
func (d *Dashboard) signin(w http.ResponseWriter, r *http.Request) {
	addr := d.clientAddr(r)
	if wait := d.signins.wait(addr); wait > 0 {
		secs := int(wait.Seconds() + 0.999)
		d.log.Warn().Str("remote", r.RemoteAddr).Str("client", addr).Msg("dashboard: sign-in refused: too many failed sign-ins from this address")
		d.recordSession(r, "", audit.OpSignIn, "rate_limited", "too many failed sign-ins from "+addr)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		d.render(w, http.StatusTooManyRequests, "signin.html", page{Title: "Sign in", Notice: d.proxyNotice(),
			Error: fmt.Sprintf("Too many failed sign-ins from your address in the last %s; try again in %d seconds. Nothing was done.", d.cfg.SignInWindow, secs)})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	token := strings.TrimSpace(r.PostFormValue("token"))
	p, ok := d.cfg.Policy.Principal(token)
	if !ok {
		d.signins.failed(addr)
		d.log.Warn().Str("remote", r.RemoteAddr).Str("client", addr).Msg("dashboard: sign-in with an unknown token refused")
		d.recordSession(r, "", audit.OpSignIn, "unauthorized", "an unknown token; from "+addr)
		d.render(w, http.StatusUnauthorized, "signin.html", page{Title: "Sign in", Notice: d.proxyNotice(),
			Error: "That token is not one the permissions file knows. Nothing was done."})
		return
	}
	v, exp := d.newSession(p)
	d.setSession(w, r, v, exp)
	d.log.Info().Str("principal", p.Name).Str("remote", r.RemoteAddr).Msg("dashboard: signed in")
	d.recordSession(r, p.Name, audit.OpSignIn, "", "from "+addr)
	http.Redirect(w, r, "/dashboard/", http.StatusSeeOther)
}

// signout ends a token session on the server (its cookie is refused from
// then on, wherever it was copied) and clears the cookie. A proxy's
// sign-in is the proxy's to end.
func (d *Dashboard) signout(w http.ResponseWriter, r *http.Request, s session) {
	d.setSession(w, r, "", time.Time{})
	if s.via == ViaToken && s.id != "" {
		if err := d.d.Revocations.Revoke(r.Context(), s.id, s.exp); err != nil {
			d.log.Error().Err(err).Str("principal", s.p.Name).Msg("dashboard: a sign-out could not be recorded")
			d.render(w, http.StatusServiceUnavailable, "error.html", page{Title: "Not signed out",
				Error: "Your session could not be ended on the server just now (its store did not answer); the cookie was cleared in this browser only. Sign in and out again shortly."})
			return
		}
		d.log.Info().Str("principal", s.p.Name).Str("remote", r.RemoteAddr).Msg("dashboard: signed out")
		d.recordSession(r, s.p.Name, audit.OpSignOut, "", "from "+d.clientAddr(r))
	}
	http.Redirect(w, r, "/dashboard/signin", http.StatusSeeOther)
}

// recordSession puts a sign-in or sign-out in the audit trail, when the
// dashboard has one (Deps.Sessions).
func (d *Dashboard) recordSession(r *http.Request, principal, op, code, detail string) {
	if d.d.Sessions != nil {
		d.d.Sessions.RecordSession(r.Context(), "dashboard", principal, op, code, detail)
	}
}

// base is the page every signed-in template starts from.
func (d *Dashboard) base(s session, title string) page {
	return page{Title: title, Who: s.p.ID(), CSRF: s.csrf}
}

func (d *Dashboard) view(r *http.Request, s session, rep engine.Replay) replayView {
	v := replayView{Replay: rep, Live: !rep.State.Terminal()}
	for _, c := range controlsFor(rep) {
		if d.d.Backend.MayControl(r.Context(), s.p, c.Verb, rep) {
			v.Controls = append(v.Controls, c)
		}
	}
	var channel, thread string
	if d.d.Threads != nil {
		if c, t, _, err := d.d.Threads.Get(r.Context(), rep.ID); err == nil {
			channel, thread = c, t
		}
	}
	if channel != "" && thread != "" {
		v.Where = "Slack thread in " + channel
		if d.cfg.SlackURL != "" {
			v.Thread = strings.TrimRight(d.cfg.SlackURL, "/") + "/archives/" + url.PathEscape(channel) + "/p" +
				strings.ReplaceAll(thread, ".", "") + "?thread_ts=" + url.QueryEscape(thread) + "&cid=" + url.QueryEscape(channel)
		}
	}
	return v
}

// controlsFor are the controls a replay's state allows (the Slack progress
// message's buttons): none that would do nothing, so a stopped replay with
// nothing left to send offers Cancel alone.
func controlsFor(rep engine.Replay) []control {
	cancel := control{Verb: "cancel", Label: "Cancel", Danger: true}
	switch rep.State {
	case engine.StateQueued, engine.StateRunning:
		return []control{{Verb: "pause", Label: "Pause"}, cancel}
	case engine.StatePaused:
		return []control{{Verb: "resume", Label: "Resume"}, cancel}
	case engine.StateStopped:
		if rep.Total-rep.Sent-rep.Missing-rep.Failed-rep.InDoubt <= 0 {
			return []control{cancel} // nothing left: continuing would send nothing
		}
		return []control{{Verb: "resume", Label: "Continue anyway", Danger: true}, cancel}
	}
	return nil
}

// index shows the replays (filtered by state and DLQ), the DLQs and the
// latest audit entries. With ?part=replays it renders only the replays'
// table, which the page's script fetches to stay current.
func (d *Dashboard) index(w http.ResponseWriter, r *http.Request, s session) {
	ctx := r.Context()
	p := d.base(s, "Replays")
	p.States, p.State, p.DLQ = states, r.URL.Query().Get("state"), r.URL.Query().Get("dlq")
	rs, err := d.d.Backend.Replays(ctx, s.p, d.cfg.ListSize)
	if err != nil {
		p.Error = "The replays could not be read: " + d.told(err, "list replays")
	}
	seen := map[string]bool{}
	for _, rep := range rs {
		if !seen[rep.DLQ] && !rep.Unverifiable {
			seen[rep.DLQ] = true
			p.DLQNames = append(p.DLQNames, rep.DLQ)
		}
		if (p.State == "" || string(rep.State) == p.State) && (p.DLQ == "" || rep.DLQ == p.DLQ) {
			p.Replays = append(p.Replays, d.view(r, s, rep))
		}
	}
	sort.Strings(p.DLQNames)
	if r.URL.Query().Get("part") == "replays" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := d.pages["index.html"].ExecuteTemplate(w, "replays", p); err != nil {
			d.log.Error().Err(err).Msg("dashboard: render replays")
		}
		return
	}
	dlqs, err := d.d.Backend.DLQs(ctx, s.p)
	if err != nil && p.Error == "" {
		p.Error = "The DLQs could not be read: " + d.told(err, "list DLQs")
	}
	for _, q := range dlqs {
		v := dlqView{DLQ: q, Spark: sparkline(q.Depths)}
		if len(q.Depths) > 0 {
			v.Peak = slices.Max(q.Depths)
		}
		p.DLQs = append(p.DLQs, v)
	}
	p.Alerts = d.alerts(ctx, s)
	p.Audit, _ = d.d.Backend.Audit(ctx, s.p, audit.Filter{Since: d.now().Add(-24 * time.Hour), Limit: 1000})
	slices.Reverse(p.Audit)
	if len(p.Audit) > 15 {
		p.Audit = p.Audit[:15]
	}
	d.render(w, http.StatusOK, "index.html", p)
}

// replay shows one replay: its counts, what its preview found, its steps
// so far (the page's script adds the next ones from the event stream),
// the returns grouped by failure, the follow-ups' results and the
// controls allowed.
func (d *Dashboard) replay(w http.ResponseWriter, r *http.Request, s session) {
	ctx := r.Context()
	id := r.PathValue("id")
	rep, err := d.d.Backend.Replay(ctx, s.p, id)
	if err != nil {
		d.render(w, http.StatusNotFound, "error.html", page{Title: "Replay", Who: s.p.ID(), CSRF: s.csrf, Error: sentence(err)})
		return
	}
	p := d.base(s, "Replay "+id)
	ids, evs, err := d.d.Backend.Events(ctx, s.p, id)
	if err != nil {
		p.Error = "Its events could not be read: " + d.told(err, "read events")
	}
	for i, e := range evs {
		p.LastEvent = ids[i]
		switch e.Kind {
		case engine.EventFollowUp:
			p.FollowUps = append(p.FollowUps, followUp{At: e.At, Label: e.Check.Label, Check: e.Check})
		default:
			p.Steps = append(p.Steps, stepView{At: e.At, Kind: string(e.Kind), Text: e.Text, Step: e.Step})
		}
	}
	slices.Reverse(p.Steps)
	v := d.view(r, s, rep)
	p.R = &v
	if r.URL.Query().Get("part") == "controls" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := d.pages["replay.html"].ExecuteTemplate(w, "controls", controlsView{ID: v.ID, CSRF: s.csrf, Controls: v.Controls}); err != nil {
			d.log.Error().Err(err).Msg("dashboard: render controls")
		}
		return
	}
	p.Returns = groupReturns(rep)
	p.Preview = d.preview(r, s, id)
	if asked, ok := doneNotices[r.URL.Query().Get("done")]; ok {
		p.Notice = fmt.Sprintf("%s; it is %s now.", asked, rep.State)
	}
	d.render(w, http.StatusOK, "replay.html", p)
}

// preview is what the replay's page shows of the preview it was approved
// from.
func (d *Dashboard) preview(r *http.Request, s session, id string) *previewView {
	c, err := d.d.Backend.Preview(r.Context(), s.p, id)
	switch {
	case err != nil:
		return &previewView{Note: "What its preview found could not be read: " + d.told(err, "read preview")}
	case c == nil:
		return &previewView{Note: "What its preview found is not kept (any more)."}
	}
	v := &previewView{Targets: engine.ConcernFirst(c.Targets)}
	if len(v.Targets) > maxPreviewTargets {
		v.More = len(v.Targets) - maxPreviewTargets
		v.Targets = v.Targets[:maxPreviewTargets]
	}
	v.Warnings = c.Warnings()
	switch v.Warnings {
	case 0:
		v.Verdict = "Safe to replay"
	case 1:
		v.Verdict = "1 problem"
	default:
		v.Verdict = fmt.Sprintf("%d problems", v.Warnings)
	}
	if engine.StillArriving(c.Arrivals) {
		v.Problems = append(v.Problems, problemView{Kind: "still_arriving", Title: "Still arriving",
			Text: fmt.Sprintf("%d in the last %s: the cause may not be fixed yet.", c.Arrivals.Recent, window(c.Arrivals.RecentWindow))})
	}
	for _, pr := range c.Problems {
		v.Problems = append(v.Problems, problemOf(pr))
	}
	return v
}

// window words the recent window: "5 min".
func window(d time.Duration) string {
	if d >= time.Minute && d%time.Minute == 0 {
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return d.String()
}

// problemTitles are the problems' titles, as Slack's preview has them.
var problemTitles = map[engine.ProblemKind]string{
	engine.ProblemTargetMissing:      "Target queue missing",
	engine.ProblemNoTarget:           "No target queue",
	engine.ProblemNoConsumers:        "No consumers",
	engine.ProblemAlreadyReplayed:    "Already replayed",
	engine.ProblemParked:             "Parked",
	engine.ProblemDeliveryLimit:      "Quorum DLQ delivery limit",
	engine.ProblemRetryState:         "Consumer would refuse replayed copies",
	engine.ProblemPartialRead:        "Partial read",
	engine.ProblemUnreadable:         "Unreadable headers",
	engine.ProblemConsumersUnchanged: "Consumers not restarted",
}

// problemOf is one problem as the terminal and the API word it (the
// engine's detail), under Slack's title for it.
func problemOf(pr engine.Problem) problemView {
	v := problemView{Kind: pr.Kind, Title: problemTitles[pr.Kind], Text: pr.Detail}
	if v.Title == "" {
		v.Title = string(pr.Kind)
	}
	if pr.Kind == engine.ProblemNoTarget && pr.InvalidTargets > 0 {
		v.Title = "No valid target"
	}
	return v
}

// groupReturns counts the replay's copies that came back, by failure.
func groupReturns(r engine.Replay) []returnGroup {
	counts := map[string]int{}
	for _, f := range r.Failures {
		if f.Kind != engine.FailureReturned {
			continue
		}
		reason := f.Detail
		if reason == "" {
			reason = f.Reason
		}
		counts[reason]++
	}
	var out []returnGroup
	for k, n := range counts {
		out = append(out, returnGroup{Reason: k, Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Count > out[j].Count || out[i].Count == out[j].Count && out[i].Reason < out[j].Reason
	})
	return out
}

// events streams the replay's events to the page's script.
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request, s session) {
	d.d.Backend.ServeEvents(w, r, s.p, r.PathValue("id"), r.URL.Query().Get("after"))
}

// control pauses, resumes or cancels a replay; the backend decides whether
// this principal may, and a refusal is shown on the replay's page.
func (d *Dashboard) control(w http.ResponseWriter, r *http.Request, s session) {
	id, verb := r.PathValue("id"), r.PathValue("verb")
	_, err := d.d.Backend.Control(r.Context(), s.p, verb, id)
	if err != nil {
		d.log.Info().Str("principal", s.p.Name).Str("replay_id", id).Str("verb", verb).Err(err).Msg("dashboard: control refused")
		d.render(w, statusOf(err), "error.html", page{Title: "Refused", Who: s.p.ID(), CSRF: s.csrf, Error: sentence(err)})
		return
	}
	d.log.Info().Str("principal", s.p.Name).Str("replay_id", id).Str("verb", verb).Msg("dashboard: control requested")
	target := "/dashboard/replays/" + url.PathEscape(id)
	if _, ok := doneNotices[verb]; ok {
		target += "?done=" + verb
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// doneNotices are the notices a replay's page shows after a control, by
// the key its ?done= names; any other value shows nothing, so no text of
// the address ever reaches the page.
var doneNotices = map[string]string{
	"pause":  "Asked to pause it",
	"resume": "Asked to resume it",
	"cancel": "Asked to cancel it",
}

// audit shows the trail, filtered, newest first.
func (d *Dashboard) audit(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	p := d.base(s, "Audit trail")
	p.AuditFilter = auditFilterView{Principal: q.Get("principal"), FrontEnd: q.Get("front_end"), Op: q.Get("op"),
		Outcome: q.Get("outcome"), DLQ: q.Get("dlq"), ReplayID: q.Get("replay_id"), Since: q.Get("since")}
	f := audit.Filter{Principal: p.AuditFilter.Principal, FrontEnd: p.AuditFilter.FrontEnd, Op: p.AuditFilter.Op,
		Outcome: p.AuditFilter.Outcome, DLQ: p.AuditFilter.DLQ, ReplayID: p.AuditFilter.ReplayID, Limit: 1000}
	since := p.AuditFilter.Since
	if since == "" {
		since = "24h"
		p.AuditFilter.Since = since
	}
	if dur, err := time.ParseDuration(since); err == nil && dur > 0 {
		f.Since = d.now().Add(-dur)
	} else if t, err := time.Parse(time.RFC3339, since); err == nil {
		f.Since = t
	} else {
		p.Error = fmt.Sprintf("since must be a duration such as 2h or an RFC 3339 time, not %q; showing the last 24 hours.", since)
		f.Since = d.now().Add(-24 * time.Hour)
	}
	entries, err := d.d.Backend.Audit(r.Context(), s.p, f)
	if err != nil {
		p.Error = sentence(err)
	}
	slices.Reverse(entries)
	p.Audit = entries
	d.render(w, http.StatusOK, "audit.html", p)
}

// told logs a backend error with its cause (which the person is not
// shown: a fault's sentence carries a request id instead) and returns the
// sentence the person reads.
func (d *Dashboard) told(err error, op string) string {
	ev := d.log.Warn().Err(err).Str("op", op)
	if cause := errors.Unwrap(err); cause != nil {
		ev = ev.AnErr("cause", cause)
	}
	ev.Msg("dashboard: a read failed")
	return err.Error()
}

// sentence is an error as the person reads it.
func sentence(err error) string {
	var fe *commands.ForbiddenError
	if errors.As(err, &fe) {
		return fe.Error() + " Nothing was done."
	}
	return err.Error()
}

// statusOf is the HTTP status of a backend error: one that carries its
// own (HTTPStatus), else 400.
func statusOf(err error) int {
	var hs interface{ HTTPStatus() int }
	if errors.As(err, &hs) {
		return hs.HTTPStatus()
	}
	return http.StatusBadRequest
}

// alerts are the DLQ watch's open alerts of the DLQs s may read.
func (d *Dashboard) alerts(ctx context.Context, s session) []engine.AlertRecord {
	if d.d.Alerts == nil {
		return nil
	}
	all, err := d.d.Alerts.List(ctx)
	if err != nil {
		d.log.Warn().Err(err).Msg("dashboard: the open alerts could not be listed")
		return nil
	}
	var out []engine.AlertRecord
	for _, a := range all {
		if d.cfg.Policy.Allowed(s.p.ID(), nil, commands.ActionRead, a.DLQ) {
			out = append(out, a)
		}
	}
	return out
}
