package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// follow hands replay id to the running workers, or runs it here when none
// announced itself, and reports progress on w until the replay ends or
// pauses. Interrupting a follower detaches (the workers carry on);
// interrupting the process that runs the replay releases its lease and
// leaves the replay paused.
func (a *app) follow(ctx context.Context, id string, out *output, progress io.Writer) (engine.Replay, error) {
	workers, err := a.store.Workers().List(ctx)
	if err != nil {
		return engine.Replay{}, err
	}
	done := make(chan struct{})
	var runErr error
	if len(workers) > 0 {
		fmt.Fprintf(progress, "replay %s handed to %d worker(s); Ctrl-C detaches without cancelling\n", id, len(workers))
		if err := a.store.Jobs().Enqueue(ctx, id); err != nil {
			return engine.Replay{}, err
		}
	} else {
		fmt.Fprintf(progress, "no worker is running: running replay %s here; Ctrl-C pauses it\n", id)
		go func() {
			defer close(done)
			_, runErr = a.svc.Run(ctx, id, "terminal-"+engine.NewReplayID()[2:])
		}()
	}
	last := ""
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		// A detached follower reads with a fresh context after Ctrl-C.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		r, err := a.svc.Status(rctx, id)
		cancel()
		if err != nil {
			return r, err
		}
		if line := progressLine(r); line != last {
			fmt.Fprintln(progress, line)
			last = line
		}
		ended := r.State.Terminal() || r.State == engine.StateStopped || r.State == engine.StatePaused
		if len(workers) == 0 {
			select {
			case <-done:
				if r2, err := a.svc.Status(context.WithoutCancel(ctx), id); err == nil {
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
		if len(workers) > 0 {
			interrupted = ctx.Done()
		}
		select {
		case <-tick.C:
		case <-done:
		case <-interrupted:
		}
	}
}

func progressLine(r engine.Replay) string {
	if r.Missing > 0 {
		return fmt.Sprintf("%s %-11s step %d  sent %d/%d  !! %d DISAPPEARED (neither sent by dlqbot nor in the DLQ)  settled %d  returned %d  not delivered %d  %s",
			r.ID, r.State, r.Step, r.Sent, r.Total, r.Missing, r.Settled, r.Returned, r.Failed, r.Note)
	}
	return fmt.Sprintf("%s %-11s step %d  sent %d/%d  settled %d  returned %d  missing %d  not delivered %d  %s",
		r.ID, r.State, r.Step, r.Sent, r.Total, r.Settled, r.Returned, r.Missing, r.Failed, r.Note)
}

func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}
