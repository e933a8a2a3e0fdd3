package main

import (
	"net/http"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/dashboard"
	"github.com/stroma/dlqbot/dashboard/dashapi"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/ops"
	"github.com/stroma/dlqbot/store"
)

var (
	_ dashapi.Queues        = (*amqp.Broker)(nil)
	_ dashboard.Revocations = (*store.DashboardSessions)(nil)
)

// mountDashboard serves the dashboard at /dashboard/ on the operations o
// (with svc, on o, for the event stream and the audit export); it is off,
// saying how to turn it on, without a permissions file.
func (r *replica) mountDashboard(o *ops.Ops, svc *api.Service) error {
	a := r.a
	signIn := o.Policy()
	if signIn == nil {
		signIn = a.demoDashboard
	}
	note := ""
	if o.Policy() == nil && a.demoDashboard != nil {
		note = demoSignInNote
	}
	d, err := dashboard.New(dashboard.Config{Policy: signIn, SessionKey: []byte(a.cfg.SessionKey),
		TrustedProxies: a.cfg.TrustedProxies, SlackURL: a.cfg.SlackWorkspaceURL, SignInNote: note},
		dashboard.Deps{Backend: dashapi.New(o, svc, a.broker, a.store.Tokens()), Threads: a.store.SlackRefs(),
			Revocations: a.store.DashboardSessions(), Sessions: o, Alerts: a.store.Alerts(), Log: r.log})
	if err != nil {
		return usageError("dashboard: %w", err)
	}
	r.mux.Handle("/dashboard/", d.Handler())
	r.mux.Handle("GET /dashboard", http.RedirectHandler("/dashboard/", http.StatusMovedPermanently))
	if signIn != nil && a.cfg.SessionKey == "" && a.demoDashboard == nil {
		r.log.Info().Msg("dashboard: DLQBOT_DASHBOARD_SESSION_KEY is not set, so sign-ins last until this process restarts and hold on this replica only")
	}
	r.log.Info().Bool("on", signIn != nil).Int("trusted_proxies", len(a.cfg.TrustedProxies)).Msg("dashboard at /dashboard/")
	return nil
}
