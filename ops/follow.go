package ops

import (
	"context"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/engine"
)

// Follow is Replay for a caller who starts following a replay's progress
// (the terminal's status --follow, the API's event stream): the same
// `read` on its DLQ — the record holds returned copies' exception text —
// and one audit entry, done or refused. The reads that follow are
// Replay's.
func (o *Ops) Follow(ctx context.Context, c Caller, id string) (r engine.Replay, err error) {
	e := audit.Entry{Op: audit.OpFollow, ReplayID: id}
	defer func() { o.record(ctx, c, e, err) }()
	r, err = o.Replay(ctx, c, id)
	if err == nil {
		e.DLQ, e.Vhost, e.TokenRef, e.Messages = r.DLQ, r.Vhost, audit.TokenRef(r.Token), r.Total
	}
	return r, err
}
