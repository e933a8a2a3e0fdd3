package ops

import (
	"context"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/engine"
)

// Preview previews sel for c: `read` on the DLQ (a preview shows
// payloads) and the scan rate limit. It changes nothing. A preview that
// selected nothing has no token.
func (o *Ops) Preview(ctx context.Context, c Caller, sel engine.Selection) (p *engine.Preview, err error) {
	e := audit.Entry{Op: audit.OpPreview, DLQ: sel.DLQ, Vhost: sel.Vhost}
	defer func() {
		if p != nil {
			e.TokenRef, e.Messages = audit.TokenRef(p.Token), p.Matched
		}
		o.record(ctx, c, e, err)
	}()
	if err := o.permit(ctx, c, func(id string, g []string) error { return o.policy.CheckPreview(id, g, sel.DLQ) }); err != nil {
		return nil, err
	}
	if err := o.scan(ctx, c, sel.Vhost, sel.DLQ); err != nil {
		return nil, err
	}
	p, err = o.d.Engine.Preview(ctx, sel, o.acting(c))
	if err != nil {
		return nil, classify(err, sel.DLQ)
	}
	return p, nil
}
