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
// resumed it through Approve or Control (which checked c), and reads it as
// Follow does (`read` on its DLQ, one audit entry) for c to follow. When
// workers announced themselves and the replay is not running already (a
// running one has an owner), it asks them to run it (Deps.Jobs) before
// that read, so that a caller who may not read the DLQ still leaves the
// replay with a worker. It returns how many workers there are — none:
// nothing was handed out, and the caller runs the replay itself — and the
// replay as read. Without Deps.Workers and Deps.Jobs it hands nothing out.
func (o *Ops) HandOff(ctx context.Context, c Caller, id string) (workers int, r engine.Replay, err error) {
	if o.d.Workers != nil && o.d.Jobs != nil {
		ws, err := o.d.Workers.List(ctx)
		if err != nil {
			return 0, r, fmt.Errorf("ops: hand off %s: %w", id, err)
		}
		workers = len(ws)
	}
	if workers > 0 {
		cur, err := o.d.Engine.Status(ctx, id)
		if err != nil {
			return workers, r, Classify(err, id)
		}
		if cur.State != engine.StateRunning {
			if err := o.d.Jobs.Enqueue(ctx, id); err != nil {
				return workers, r, fmt.Errorf("ops: hand off %s: %w", id, err)
			}
		}
	}
	r, err = o.Follow(ctx, c, id)
	return workers, r, err
}
