package ops

import (
	"context"
	"strings"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/engine"
)

// Preview previews sel for c: `read` on the DLQ (a preview shows
// payloads), the DLQ's channel allowlist when c calls from a channel, and
// the scan rate limit. It changes nothing. A preview that
// selected nothing has no token.
func (o *Ops) Preview(ctx context.Context, c Caller, sel engine.Selection) (p *engine.Preview, err error) {
	e := audit.Entry{Op: audit.OpPreview, DLQ: sel.DLQ, Vhost: sel.Vhost}
	defer func() {
		if p != nil {
			e.TokenRef, e.Messages = audit.TokenRef(p.Token), p.Matched
			e.Detail = unchangedDetail(p.Targets)
		}
		o.record(ctx, c, e, err)
	}()
	if err := o.admit(ctx, c); err != nil {
		return nil, err
	}
	if err := o.permit(ctx, c, func(id string, g []string) error { return o.policy.CheckPreview(id, g, sel.DLQ) }); err != nil {
		return nil, err
	}
	if c.Channel != "" {
		// Where the preview will be shown, before anything is read.
		if err := o.policy.CheckChannel(sel.DLQ, c.Channel); err != nil {
			return nil, Classify(err, sel.DLQ)
		}
	}
	if err := o.scan(ctx, c, sel.Vhost, sel.DLQ); err != nil {
		return nil, err
	}
	p, err = o.d.Engine.Preview(ctx, sel, o.acting(c))
	if err != nil {
		return nil, Classify(err, sel.DLQ)
	}
	o.saveGroups(ctx, sel, p)
	return p, nil
}

// Samples decides whether c may see the sample messages of the preview
// behind token, which show payloads and exception text: c needs `read`
// on the DLQ, whoever made the preview. dlq is the preview's DLQ when the
// front end knows it ("" loads the token's header). It returns the DLQ and
// records the decision; the front end shows the samples only when err is
// nil. It reads nothing from the broker.
func (o *Ops) Samples(ctx context.Context, c Caller, token, dlq string) (_ string, err error) {
	e := audit.Entry{Op: audit.OpSamples, TokenRef: audit.TokenRef(token), DLQ: dlq}
	defer func() { o.record(ctx, c, e, err) }()
	if dlq == "" {
		f, err := o.d.Tokens.LoadHeader(ctx, token)
		if err != nil {
			return "", Classify(err, token)
		}
		dlq, e.DLQ, e.Vhost, e.Messages = f.DLQ, f.DLQ, f.Vhost, f.Total
	}
	if err := o.permit(ctx, c, func(id string, g []string) error {
		return o.policy.CheckRead(id, g, dlq, "to see its sample messages")
	}); err != nil {
		return dlq, err
	}
	return dlq, nil
}

// unchangedDetail is the audit detail of a preview with targets whose
// consumers were all connected before their messages failed ("" when
// none): the trail, and the dashboard's audit page, show it.
func unchangedDetail(targets []engine.TargetView) string {
	var qs []string
	for _, t := range targets {
		if t.ConsumersSinceFailure == engine.SinceUnchanged {
			qs = append(qs, t.Queue)
		}
	}
	if len(qs) == 0 {
		return ""
	}
	return "consumers not restarted since these messages failed: " + strings.Join(qs, ", ")
}
