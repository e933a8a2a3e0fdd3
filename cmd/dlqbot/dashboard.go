package main

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/dashboard"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/store"
)

// mountDashboard serves the dashboard at /dashboard/ on the API's
// operations (off, saying how to turn it on, without a permissions file).
func (r *replica) mountDashboard(policy *commands.Policy, svc *api.Service) error {
	a := r.a
	d, err := dashboard.New(dashboard.Config{Policy: policy, SessionKey: []byte(a.cfg.SessionKey),
		TrustedProxies: a.cfg.TrustedProxies, SlackURL: a.cfg.SlackWorkspaceURL},
		dashboard.Deps{Backend: &dashboardBackend{svc: svc, broker: a.broker, tokens: a.store.Tokens()}, Log: r.log})
	if err != nil {
		return usageError("dashboard: %w", err)
	}
	r.mux.Handle("/dashboard/", d.Handler())
	r.mux.Handle("GET /dashboard", http.RedirectHandler("/dashboard/", http.StatusMovedPermanently))
	if policy != nil && a.cfg.SessionKey == "" {
		r.log.Info().Msg("dashboard: DLQBOT_DASHBOARD_SESSION_KEY is not set, so sign-ins last until this process restarts and hold on this replica only")
	}
	r.log.Info().Bool("on", policy != nil).Int("trusted_proxies", len(a.cfg.TrustedProxies)).Msg("dashboard at /dashboard/")
	return nil
}

// dashboardBackend is the dashboard's Backend on the API's operations
// (api.Service decides every permission), the broker's counts and the
// frozen previews. The dashboard acts as front end "dashboard".
type dashboardBackend struct {
	svc    *api.Service
	broker *amqp.Broker
	tokens *store.Tokens
}

var _ dashboard.Backend = (*dashboardBackend)(nil)

func dashCaller(p commands.Principal) api.Caller { return api.CallerOf(p, "dashboard") }

func (b *dashboardBackend) Replays(ctx context.Context, p commands.Principal, n int) ([]engine.Replay, error) {
	rs, _, err := b.svc.List(ctx, dashCaller(p), min(n, api.DefaultMaxList))
	return rs, err
}

func (b *dashboardBackend) Replay(ctx context.Context, p commands.Principal, id string) (engine.Replay, error) {
	return b.svc.Replay(ctx, dashCaller(p), id)
}

func (b *dashboardBackend) Events(ctx context.Context, p commands.Principal, id string) ([]string, []engine.Event, error) {
	return b.svc.ReplayEvents(ctx, dashCaller(p), id)
}

func (b *dashboardBackend) ServeEvents(w http.ResponseWriter, r *http.Request, p commands.Principal, id, after string) {
	b.svc.ServeEvents(w, r, dashCaller(p), id, after)
}

func (b *dashboardBackend) MayControl(ctx context.Context, p commands.Principal, verb string, r engine.Replay) bool {
	return b.svc.MayControl(ctx, dashCaller(p), verb, r)
}

func (b *dashboardBackend) Control(ctx context.Context, p commands.Principal, verb, id string) (engine.Replay, error) {
	return b.svc.Control(ctx, dashCaller(p), verb, id)
}

func (b *dashboardBackend) Audit(ctx context.Context, p commands.Principal, f audit.Filter) ([]audit.Entry, error) {
	return b.svc.Audit(ctx, dashCaller(p), f)
}

// DLQs are the DLQs of the recent replays p may see (the list only shows
// those it may read), with the broker's counts now, the targets their
// previews named and the last hour's arrivals per minute.
func (b *dashboardBackend) DLQs(ctx context.Context, p commands.Principal) ([]dashboard.DLQ, error) {
	rs, _, err := b.svc.List(ctx, dashCaller(p), api.DefaultMaxList)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out []dashboard.DLQ
	index := map[string]int{}
	for _, r := range rs {
		i, ok := index[r.DLQ]
		if !ok {
			if len(out) == 20 {
				continue
			}
			i = len(out)
			index[r.DLQ] = i
			out = append(out, dashboard.DLQ{Name: r.DLQ, Bucket: time.Minute})
		}
		if f, err := b.tokens.Load(ctx, r.Token); err == nil {
			for _, q := range f.TargetQueues() {
				if !slices.ContainsFunc(out[i].Targets, func(t dashboard.Target) bool { return t.Queue == q }) {
					out[i].Targets = append(out[i].Targets, dashboard.Target{Queue: q})
				}
			}
		}
	}
	for i := range out {
		q := &out[i]
		info, err := b.broker.Inspect(ctx, q.Name)
		if err != nil {
			q.Problem = "the broker could not be asked"
			continue
		}
		q.Exists, q.Ready, q.Consumers = info.Exists, info.Ready, info.Consumers
		for j := range q.Targets {
			if t, err := b.broker.Inspect(ctx, q.Targets[j].Queue); err == nil {
				q.Targets[j].Exists, q.Targets[j].Consumers = t.Exists, t.Consumers
			}
		}
		if q.Exists {
			if arr, err := b.broker.Arrivals(ctx, q.Name, time.Hour, time.Minute); err == nil {
				q.Arrivals = arr
			}
		}
	}
	return out, nil
}
