package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/client"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// remote is the terminal as a client of a dlqbot server (DLQBOT_SERVER,
// DLQBOT_TOKEN): every command is a call of the server's HTTP API, which
// holds the broker's and Redis's credentials and the signing key, and
// decides as the token's principal. Nothing here opens RabbitMQ or Redis.
type remote struct {
	c *client.Client
}

func newRemote(cfg config, program string) *remote {
	return &remote{c: &client.Client{Base: cfg.Server, Token: cfg.Token, Program: program}}
}

// run is terminal's switch, through the server: the same words, --json
// documents and exit statuses as the direct terminal.
func (rt *remote) run(ctx context.Context, cmd commands.Command, follow bool, out *output, stderr io.Writer) error {
	switch c := cmd.(type) {
	case commands.PreviewCmd:
		p, err := rt.c.Preview(ctx, c.Selection.String())
		if err != nil {
			return out.fail(remoteErr(err))
		}
		return showPreview(out, p)
	case commands.ReplayCmd:
		return rt.replay(ctx, out, stderr, c)
	case commands.StatusCmd:
		if follow {
			return rt.followStatus(ctx, out, stderr, c.ReplayID)
		}
		if c.ReplayID == "" {
			return rt.list(ctx, out)
		}
		r, err := rt.c.Replay(ctx, c.ReplayID)
		if err != nil {
			return out.fail(remoteErr(err))
		}
		if out.json {
			return out.doc(r)
		}
		printReplay(out.w, r)
		printNext(out.w, r)
		return nil
	case commands.ListCmd:
		d, err := rt.c.DLQs(ctx)
		if err != nil {
			return out.fail(remoteErr(err))
		}
		return showDLQs(out, d)
	case commands.CheckCmd:
		rep, err := rt.c.Check(ctx, c.ReplayID)
		if err != nil {
			return out.fail(remoteErr(err))
		}
		if out.json {
			return out.doc(rep)
		}
		printCheck(out.w, rep)
		return nil
	case commands.PauseCmd:
		return rt.control(ctx, out, engine.ControlPause, c.ReplayID)
	case commands.CancelCmd:
		return rt.control(ctx, out, engine.ControlCancel, c.ReplayID)
	case commands.ResumeCmd:
		r, err := rt.c.Control(ctx, c.Action(), c.ReplayID)
		if err != nil {
			return out.fail(remoteErr(err))
		}
		return rt.followEnd(ctx, out, out.progress(stderr), r)
	default:
		return out.fail(usageError("%s is not a terminal command", cmd.Name()))
	}
}

func (rt *remote) list(ctx context.Context, out *output) error {
	rs, _, err := rt.c.List(ctx, 20)
	if err != nil {
		return out.fail(remoteErr(err))
	}
	if out.json {
		if rs == nil {
			rs = []engine.Replay{}
		}
		return out.doc(map[string]any{"replays": rs})
	}
	printList(out.w, rs)
	return nil
}

func (rt *remote) control(ctx context.Context, out *output, action engine.ControlAction, id string) error {
	r, err := rt.c.Control(ctx, action, id)
	if err != nil {
		return out.fail(remoteErr(err))
	}
	return out.controlled(action, r)
}

// replay approves a token and follows the replay the server's workers run
// to its end.
func (rt *remote) replay(ctx context.Context, out *output, stderr io.Writer, c commands.ReplayCmd) error {
	r, err := rt.c.Approve(ctx, c.Token, apiParams(c.Params), "")
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && ae.Code == api.CodeChanged {
			if out.json {
				return out.failDoc(remoteErr(err), map[string]any{"changes": ae.Changes})
			}
			fmt.Fprintln(out.w, "The DLQ or its targets changed since the preview:")
			for _, ch := range ae.Changes {
				fmt.Fprintln(out.w, "  -", ch.Detail)
			}
			fmt.Fprintln(out.w, "Nothing was sent. Run the preview again and replay its new token.")
			return remoteErr(err)
		}
		return out.fail(remoteErr(err))
	}
	return rt.followEnd(ctx, out, out.progress(stderr), r)
}

// followEnd follows a replay just approved or resumed until it ends or
// stops again, then reports it as the direct terminal's ended does.
func (rt *remote) followEnd(ctx context.Context, out *output, live *liveLine, first engine.Replay) error {
	live.note("replay %s is run by the dlqbot server's workers; Ctrl-C detaches without cancelling", first.ID)
	r, err := rt.follow(ctx, first, live, func(r engine.Replay) bool {
		moved := r.State != first.State || r.UpdatedAt.After(first.UpdatedAt)
		return r.State.Terminal() || (moved && (r.State == engine.StateStopped || r.State == engine.StatePaused))
	})
	if err != nil {
		return out.fail(remoteErr(err))
	}
	return ended(out, r)
}

// followStatus is status --follow through the server: its event stream,
// which checks `read` on the replay's DLQ as every read does.
func (rt *remote) followStatus(ctx context.Context, out *output, stderr io.Writer, id string) error {
	plain := out.w
	if out.json {
		plain = stderr
	}
	first, err := rt.c.Replay(ctx, id)
	if err != nil {
		return out.fail(remoteErr(err))
	}
	r := first
	if !first.State.Terminal() && first.State != engine.StateStopped {
		r, err = rt.follow(ctx, first, out.progress(plain), func(r engine.Replay) bool {
			return r.State.Terminal() || r.State == engine.StateStopped
		})
		if err != nil {
			return out.fail(remoteErr(err))
		}
	}
	return watched(out, r)
}

// follow reads the replay's event stream, showing each newer state on
// live, until ended says so of a state newer than first (the stream
// starts with the replay's earlier events), the stream ends, or ctx ends
// (Ctrl-C detaches). A broken stream is opened again, for up to 30
// failed tries in a row. It returns the replay as the server has it then.
func (rt *remote) follow(ctx context.Context, first engine.Replay, live *liveLine, ended func(engine.Replay) bool) (engine.Replay, error) {
	defer live.done()
	last := first
	done := false
	for failures := 0; !done && ctx.Err() == nil; {
		err := rt.c.Events(ctx, first.ID, func(e client.Event) bool {
			if e.Kind == "end" {
				done = true
				return false
			}
			r, ok := e.Replay()
			if !ok || r.UpdatedAt.Before(last.UpdatedAt) {
				return true // an earlier event of the log
			}
			last = r
			live.update(r)
			done = ended(r)
			return !done
		})
		var ae *api.Error
		if errors.As(err, &ae) {
			return last, err // refused: no read, no such replay
		}
		if err != nil && ctx.Err() == nil {
			if failures++; failures == 30 {
				return last, err // the server stayed away for half a minute
			}
		} else {
			failures = 0
		}
		if !done {
			select { // the stream broke or the server went away: again shortly
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	// The record as it is now, read with a fresh context after Ctrl-C.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if r, err := rt.c.Replay(rctx, first.ID); err == nil {
		return r, nil
	}
	return last, nil
}

// apiParams is the API's form of the parameters the terminal parsed
// (zero values: the defaults).
func apiParams(p engine.Params) api.Params {
	var out api.Params
	if p.Step > 0 {
		out.Step = &p.Step
	}
	if p.Cap > 0 {
		out.Cap = &p.Cap
	}
	switch {
	case p.Auto:
		out.Rate = "auto"
	case p.Rate < 0:
		out.Rate = "max"
	case p.Rate > 0:
		out.Rate = api.Rate(strconv.FormatFloat(p.Rate, 'f', -1, 64))
	}
	if p.Max > 0 {
		out.Max = api.Rate(strconv.FormatFloat(p.Max, 'f', -1, 64))
	}
	if p.Timeout > 0 {
		out.Timeout = p.Timeout.String()
	}
	out.TakeOver = p.TakeOver
	return out
}

// remoteErr words the server's answer as the direct terminal does: a
// refusal keeps its code (the direct terminal's name for it) and is exit
// 1; a token the server does not accept, or a server without the API, is
// a configuration mistake (exit 2).
func remoteErr(err error) error {
	var ae *api.Error
	if !errors.As(err, &ae) {
		return failed(err)
	}
	switch ae.Code {
	case api.CodeUnauthorized:
		return usageError("DLQBOT_TOKEN: %s", ae.Message)
	case api.CodeAPIDisabled:
		return usageError("DLQBOT_SERVER: %s", ae.Message)
	}
	return failed(&remoteRefusal{ae})
}

// remoteRefusal is a refusal or failure the server answered.
type remoteRefusal struct{ e *api.Error }

func (r *remoteRefusal) Error() string { return r.e.Message }
func (r *remoteRefusal) Unwrap() error { return r.e }

// code is the refusal's code as the direct terminal names it (package
// ops's codes; the API renames two).
func (r *remoteRefusal) code() string {
	switch r.e.Code {
	case api.CodeTokenNotFound:
		return string(ops.TokenExpired)
	case api.CodeBadRequest, api.CodeBadSelection:
		return string(ops.BadParams)
	}
	return r.e.Code
}
