// Package dashapi adapts the HTTP API's shared operations (api.Service)
// to the dashboard's Backend, until the operations layer (ops/) serves
// every front end: every permission is api.Service's decision, taken for
// the signed-in principal acting through front end "dashboard".
package dashapi

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
)

// Backend is the dashboard's Backend on the API's operations
// (api.Service decides every permission), the broker's counts and the
// frozen previews. The dashboard acts as front end "dashboard".
type Backend struct {
	svc    *api.Service
	queues Queues
	tokens Tokens
}

// Queues is what the DLQ view asks of the broker; *amqp.Broker implements
// it.
type Queues interface {
	Inspect(ctx context.Context, queue string) (engine.QueueInfo, error)
	Depths(ctx context.Context, queue string, span, bucket time.Duration) ([]int, error)
}

// Tokens reads frozen previews (for a replay's targets); the store's
// Tokens implements it.
type Tokens interface {
	Load(ctx context.Context, token string) (engine.Frozen, error)
}

// New returns the Backend on svc, asking queues for counts and tokens for
// replays' targets.
func New(svc *api.Service, queues Queues, tokens Tokens) *Backend {
	return &Backend{svc: svc, queues: queues, tokens: tokens}
}

var _ dashboard.Backend = (*Backend)(nil)

func caller(p commands.Principal) api.Caller { return api.CallerOf(p, "dashboard") }

func (b *Backend) Replays(ctx context.Context, p commands.Principal, n int) ([]engine.Replay, error) {
	rs, _, err := b.svc.List(ctx, caller(p), min(n, api.DefaultMaxList))
	return rs, err
}

func (b *Backend) Replay(ctx context.Context, p commands.Principal, id string) (engine.Replay, error) {
	return b.svc.Replay(ctx, caller(p), id)
}

func (b *Backend) Events(ctx context.Context, p commands.Principal, id string) ([]string, []engine.Event, error) {
	return b.svc.ReplayEvents(ctx, caller(p), id)
}

func (b *Backend) ServeEvents(w http.ResponseWriter, r *http.Request, p commands.Principal, id, after string) {
	b.svc.ServeEvents(w, r, caller(p), id, after)
}

func (b *Backend) MayControl(ctx context.Context, p commands.Principal, verb string, r engine.Replay) bool {
	return b.svc.MayControl(ctx, caller(p), verb, r)
}

func (b *Backend) Control(ctx context.Context, p commands.Principal, verb, id string) (engine.Replay, error) {
	return b.svc.Control(ctx, caller(p), verb, id)
}

func (b *Backend) Audit(ctx context.Context, p commands.Principal, f audit.Filter) ([]audit.Entry, error) {
	return b.svc.Audit(ctx, caller(p), f)
}

// DLQs are the DLQs of the recent replays p may see (the list only shows
// those it may read), with the broker's counts now, the targets their
// previews named and the last hour's depth per minute.
func (b *Backend) DLQs(ctx context.Context, p commands.Principal) ([]dashboard.DLQ, error) {
	rs, _, err := b.svc.List(ctx, caller(p), api.DefaultMaxList)
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
		info, err := b.queues.Inspect(ctx, q.Name)
		if err != nil {
			q.Problem = "the broker could not be asked"
			continue
		}
		q.Exists, q.Ready, q.Consumers = info.Exists, info.Ready, info.Consumers
		for j := range q.Targets {
			if t, err := b.queues.Inspect(ctx, q.Targets[j].Queue); err == nil {
				q.Targets[j].Exists, q.Targets[j].Consumers = t.Exists, t.Consumers
			}
		}
		if q.Exists {
			if dep, err := b.queues.Depths(ctx, q.Name, time.Hour, time.Minute); err == nil {
				q.Depths = dep
			}
		}
	}
	return out, nil
}
