package dashapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/dashboard"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// Backend is the dashboard's Backend on the operations (o), the API's
// event stream and audit export (svc, itself on o), the broker's counts
// and the frozen previews.
type Backend struct {
	ops    *ops.Ops
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

// Tokens reads frozen previews' headers (for a replay's targets: the
// items are never loaded); the store's Tokens implements it.
type Tokens interface {
	LoadHeader(ctx context.Context, token string) (engine.Frozen, error)
}

// New returns the Backend on o, with svc (built on o) for the event
// stream and the audit export, asking queues for counts and tokens for
// replays' targets.
func New(o *ops.Ops, svc *api.Service, queues Queues, tokens Tokens) *Backend {
	return &Backend{ops: o, svc: svc, queues: queues, tokens: tokens}
}

var _ dashboard.Backend = (*Backend)(nil)

// caller is the signed-in principal p acting through the dashboard: a
// caller with a bearer token unless a trusted proxy signed it in
// (dashboard.SignedInVia).
func caller(ctx context.Context, p commands.Principal) ops.Caller {
	if dashboard.SignedInVia(ctx) == dashboard.ViaProxy {
		return ops.ProxyCaller(p)
	}
	return ops.PrincipalCaller(p, ops.FrontDashboard)
}

// wording turns an operation's error into the API's *Error, whose HTTP
// status the dashboard answers with.
func wording(err error, subject string) error {
	if err == nil {
		return nil
	}
	return api.ErrorOf(err, subject)
}

// Replays returns up to n recent replays p may see (ops.Ops.List).
func (b *Backend) Replays(ctx context.Context, p commands.Principal, n int) ([]engine.Replay, error) {
	rs, _, err := b.ops.List(ctx, caller(ctx, p), min(n, ops.DefaultMaxList))
	return rs, wording(err, "")
}

// Replay returns one replay p may see (ops.Ops.Replay).
func (b *Backend) Replay(ctx context.Context, p commands.Principal, id string) (engine.Replay, error) {
	r, err := b.ops.Replay(ctx, caller(ctx, p), id)
	return r, wording(err, id)
}

// Preview returns the card of the preview replay id was approved from,
// as its token keeps it, when p may see the replay (ops.Ops.Replay); nil
// when the token keeps none or is gone (an approval keeps it as long as
// replay records are kept).
func (b *Backend) Preview(ctx context.Context, p commands.Principal, id string) (*engine.PreviewCard, error) {
	r, err := b.ops.Replay(ctx, caller(ctx, p), id)
	if err != nil {
		return nil, wording(err, id)
	}
	f, err := b.tokens.LoadHeader(ctx, r.Token)
	if errors.Is(err, engine.ErrTokenNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, wording(err, id)
	}
	return f.Card, nil
}

// Events returns the replay's logged events so far, when p may see it.
func (b *Backend) Events(ctx context.Context, p commands.Principal, id string) ([]string, []engine.Event, error) {
	return b.svc.ReplayEvents(ctx, caller(ctx, p), id)
}

// ServeEvents streams the replay's events to p, when p may see it.
func (b *Backend) ServeEvents(w http.ResponseWriter, r *http.Request, p commands.Principal, id, after string) {
	b.svc.ServeEvents(w, r, caller(r.Context(), p), id, after)
}

// MayControl reports whether the policy lets p pause, resume or cancel
// (verb) the replay (ops.Ops.MayControl).
func (b *Backend) MayControl(ctx context.Context, p commands.Principal, verb string, r engine.Replay) bool {
	action, ok := engine.ParseControlAction(verb)
	return ok && b.ops.MayControl(ctx, caller(ctx, p), action, r)
}

// Control pauses, resumes or cancels (verb) the replay for p
// (ops.Ops.Control, which decides again, refuses an unknown verb and
// records the request either way).
func (b *Backend) Control(ctx context.Context, p commands.Principal, verb, id string) (engine.Replay, error) {
	r, err := b.ops.Control(ctx, caller(ctx, p), engine.ControlAction(verb), id)
	return r, wording(err, id)
}

// Audit returns the audit entries f selects that p may see
// (ops.Ops.AuditVisible decides which).
func (b *Backend) Audit(ctx context.Context, p commands.Principal, f audit.Filter) ([]audit.Entry, error) {
	return b.svc.Audit(ctx, caller(ctx, p), f)
}

// DLQs are the DLQs of the recent replays p may see (the list only shows
// those it may read), with the broker's counts now, the targets their
// previews named and the last hour's depth per minute.
func (b *Backend) DLQs(ctx context.Context, p commands.Principal) ([]dashboard.DLQ, error) {
	rs, _, err := b.ops.List(ctx, caller(ctx, p), ops.DefaultMaxList)
	if err != nil {
		return nil, wording(err, "")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out []dashboard.DLQ
	index := map[string]int{}
	for _, r := range rs {
		if r.Unverifiable {
			continue // its DLQ is not known
		}
		i, ok := index[r.DLQ]
		if !ok {
			if len(out) == 20 {
				continue
			}
			i = len(out)
			index[r.DLQ] = i
			out = append(out, dashboard.DLQ{Name: r.DLQ, Bucket: time.Minute})
		}
		if f, err := b.tokens.LoadHeader(ctx, r.Token); err == nil {
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
