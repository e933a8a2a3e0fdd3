package main

import (
	"context"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// follow hands replay id to the running workers, or runs it here when none
// announced itself, and reports progress on live until the replay ends or
// pauses. Interrupting a follower detaches (the workers carry on);
// interrupting the process that runs the replay releases its lease and
// leaves the replay paused.
func (a *app) follow(ctx context.Context, id string, out *output, live *liveLine) (engine.Replay, error) {
	defer live.done()
	workers, first, err := a.ops.HandOff(ctx, a.caller, id)
	if err != nil {
		return first, err
	}
	done := make(chan struct{})
	var runErr error
	if workers > 0 {
		a.svc.DropKept(id) // kept for a run here by the approval
		live.note("replay %s handed to %d worker(s); Ctrl-C detaches without cancelling", id, workers)
	} else {
		live.note("no worker is running: running replay %s here; Ctrl-C pauses it", id)
		go func() {
			defer close(done)
			_, runErr = a.svc.Run(ctx, id, engine.NewID("terminal-"))
		}()
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		// A detached follower reads with a fresh context after Ctrl-C.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		r, err := a.ops.Replay(rctx, a.caller, id)
		cancel()
		if err != nil {
			return r, err
		}
		live.update(r)
		// A resumed replay starts paused or stopped: that is its end only
		// once a worker has written to it since.
		moved := r.State != first.State || !r.UpdatedAt.Equal(first.UpdatedAt)
		ended := r.State.Terminal() || (moved && (r.State == engine.StateStopped || r.State == engine.StatePaused))
		if workers == 0 {
			select {
			case <-done:
				if r2, err := a.ops.Replay(context.WithoutCancel(ctx), a.caller, id); err == nil {
					r = r2
				}
				if runErr != nil && !r.State.Terminal() && r.State != engine.StatePaused && r.State != engine.StateStopped {
					return r, runErr
				}
				return r, nil
			default:
			}
		} else if ended || ctx.Err() != nil {
			return r, nil
		}
		var interrupted <-chan struct{} // a follower stops on Ctrl-C; a runner waits for Run
		if workers > 0 {
			interrupted = ctx.Done()
		}
		select {
		case <-tick.C:
		case <-done:
		case <-interrupted:
		}
	}
}

// watch follows a replay that someone else runs (status --follow) until it
// ends — finished, cancelled, interrupted — or stops and waits for a
// decision, showing its progress on live. Interrupting it only detaches.
// Every read goes through the operations, as the caller: it needs `read`
// on the replay's DLQ (the record holds returned copies' exception text),
// and the first is recorded in the audit trail (ops.Follow).
func (a *app) watch(ctx context.Context, id string, live *liveLine, every time.Duration) (engine.Replay, error) {
	defer live.done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	read := a.ops.Follow // the first read is recorded; the polls are reads
	for {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		r, err := read(rctx, a.caller, id)
		read = a.ops.Replay
		cancel()
		if err != nil {
			return r, err
		}
		live.update(r)
		if r.State.Terminal() || r.State == engine.StateStopped || ctx.Err() != nil {
			return r, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}
