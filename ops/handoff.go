package ops

import (
	"context"
	"fmt"

	"github.com/stroma/dlqbot/engine"
)

// WorkerList tells which workers announced themselves (the store's
// Workers): whether a replay the terminal approved or resumed goes to them.
type WorkerList interface {
	List(ctx context.Context) ([]string, error)
}

// HandOff hands replay id to the running workers for c, who approved or
// resumed it through Approve or Control: it reads the replay as Follow
// does (`read` on its DLQ, one audit entry) and, when workers announced
// themselves and the replay is not running already (a running one has an
// owner), asks them to run it (Deps.Jobs). It returns how many workers
// there are — none: nothing was handed out, and the caller runs the
// replay itself — and the replay as read. Without Deps.Workers and
// Deps.Jobs it hands nothing out.
func (o *Ops) HandOff(ctx context.Context, c Caller, id string) (workers int, r engine.Replay, err error) {
	r, err = o.Follow(ctx, c, id)
	if err != nil || o.d.Workers == nil || o.d.Jobs == nil {
		return 0, r, err
	}
	ws, err := o.d.Workers.List(ctx)
	if err != nil {
		return 0, r, fmt.Errorf("ops: hand off %s: %w", id, err)
	}
	if len(ws) > 0 && r.State != engine.StateRunning {
		if err := o.d.Jobs.Enqueue(ctx, id); err != nil {
			return len(ws), r, fmt.Errorf("ops: hand off %s: %w", id, err)
		}
	}
	return len(ws), r, nil
}
