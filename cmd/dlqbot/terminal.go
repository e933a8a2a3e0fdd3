package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// terminal runs one subcommand of the terminal front end (docs/using.md
// "The terminal"): the
// slash command's grammar, a readable report, or with --json exactly one
// JSON document on stdout. With DLQBOT_SERVER it is a client of that
// server (remote.go); without, the operator's direct mode (direct.go).
func terminal(ctx context.Context, cfg config, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	// The engine logs from its own goroutines while the terminal prints
	// progress there: one write at a time, so lines never interleave.
	stderr = &lockedWriter{w: stderr}
	scr := &screen{}
	if id, jsonOut, verbose, ok, msg := parkArgs(args); ok {
		level := terminalLevel(verbose)
		cfg.logLevel = &level
		out := &output{w: stdout, json: jsonOut, log: zerolog.New(stderr).Level(level).With().Timestamp().Logger()}
		if msg != "" {
			return out.fail(usageError("%s", msg))
		}
		return park(ctx, cfg, id, out, stderr)
	}
	res, flags := commands.ParseArgs(args, time.Now())
	level := terminalLevel(flags.Verbose)
	cfg.logLevel = &level
	logw := scr.logs(stderr)
	out := &output{w: stdout, json: flags.JSON, details: flags.Details, tty: isTerminal(stdout), getenv: getenv, screen: scr,
		log: zerolog.New(logw).Level(level).With().Timestamp().Logger()}
	if res.Cmd == nil {
		return out.fail(usageError("%s", res.Reply))
	}
	if h, ok := res.Cmd.(commands.HelpCmd); ok {
		access := cfg.PermissionsFile != "" || cfg.Server != ""
		if out.json {
			return out.doc(map[string]any{"help": commands.HelpAs(commands.TerminalPrefix, h.Topic, access)})
		}
		fmt.Fprintln(stdout, commands.HelpAs(commands.TerminalPrefix, h.Topic, access))
		return nil
	}
	if _, ok := res.Cmd.(commands.PreviewCmd); flags.Details && !ok {
		return out.fail(usageError("--details goes with %s preview <dlq> [selection]", commands.TerminalPrefix))
	}
	if flags.Follow {
		switch c := res.Cmd.(type) {
		case commands.ReplayCmd: // replay always follows
		case commands.StatusCmd:
			if c.ReplayID == "" {
				return out.fail(usageError("status --follow needs a replay id: %s status <replay> --follow", commands.TerminalPrefix))
			}
		default:
			return out.fail(usageError("--follow goes with %s status <replay> (replay always follows)", commands.TerminalPrefix))
		}
	}
	if cfg.Server != "" {
		return newRemote(cfg, ops.FrontTerminal).run(ctx, res.Cmd, flags.Follow, out, logw)
	}
	if err := checkDirect(cfg, commands.TerminalPrefix+" "+res.Cmd.Name()); err != nil {
		return out.fail(err)
	}
	a, err := newApp(cfg, logw, false)
	if err != nil {
		return out.fail(err)
	}
	defer a.Close()
	defer a.awaitGiveBacks(ctx, logw) // before Close
	if err := a.terminalOps(); err != nil {
		return out.fail(err)
	}
	if err := a.ping(ctx); err != nil {
		return out.fail(failed(err))
	}
	switch c := res.Cmd.(type) {
	case commands.PreviewCmd:
		p, err := a.ops.Preview(ctx, a.caller, c.Selection)
		if err != nil {
			return out.fail(failed(err))
		}
		return showPreview(out, p)
	case commands.ReplayCmd:
		return a.replay(ctx, out, stderr, c)
	case commands.StatusCmd:
		if flags.Follow {
			return a.followStatus(ctx, out, stderr, c.ReplayID)
		}
		if c.ReplayID == "" {
			return a.list(ctx, out)
		}
		r, err := a.ops.Replay(ctx, a.caller, c.ReplayID)
		if err != nil {
			return out.fail(failed(err))
		}
		if out.json {
			return out.doc(r)
		}
		printReplay(stdout, r)
		printNext(stdout, r)
		return nil
	case commands.ListCmd:
		d, err := a.ops.ListDLQs(ctx, a.caller)
		if err != nil {
			return out.fail(failed(err))
		}
		return showDLQs(out, d)
	case commands.CheckCmd:
		rep, err := a.ops.Check(ctx, a.caller, c.ReplayID)
		if err != nil {
			return out.fail(failed(err))
		}
		if out.json {
			return out.doc(rep)
		}
		printCheck(stdout, rep)
		return nil
	case commands.PauseCmd:
		return a.control(ctx, out, engine.ControlPause, c.ReplayID)
	case commands.CancelCmd:
		return a.control(ctx, out, engine.ControlCancel, c.ReplayID)
	case commands.ResumeCmd:
		return a.resume(ctx, out, stderr, c.ReplayID, c.Action())
	default:
		return out.fail(usageError("%s is not a terminal command", res.Cmd.Name()))
	}
}

// terminalOps builds the operations the operator's direct terminal calls
// and the caller it is: with DLQBOT_PERMISSIONS, the principal whose
// os_users names the OS account (an account the policy does not name may
// change nothing), else "terminal:<os user>" with access control off. The
// OS account is the uid's (osUser), never $USER.
func (a *app) terminalOps() error {
	me, err := osUser()
	if err != nil {
		return err
	}
	policy, err := a.loadPolicy()
	if err != nil {
		return err
	}
	if a.ops, err = a.newOps(policy, nil); err != nil {
		return err
	}
	a.caller = ops.TerminalCaller(policy, me)
	return nil
}

func (a *app) list(ctx context.Context, out *output) error {
	rs, _, err := a.ops.List(ctx, a.caller, 20)
	if err != nil {
		return out.fail(failed(err))
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

// showDLQs is list's report, here or through the server.
func showDLQs(out *output, d ops.DLQs) error {
	if out.json {
		return out.doc(d)
	}
	printDLQs(out.w, d, time.Now())
	return nil
}

// control pauses or cancels a replay (resume follows it: see resume).
func (a *app) control(ctx context.Context, out *output, action engine.ControlAction, id string) error {
	r, err := a.ops.Control(ctx, a.caller, action, id)
	if err != nil {
		return out.fail(failed(err))
	}
	return out.controlled(action, r)
}

// controlled reports a pause or cancel asked for r, directly or through
// the server.
func (o *output) controlled(action engine.ControlAction, r engine.Replay) error {
	if o.json {
		return o.doc(r)
	}
	fmt.Fprintf(o.w, "%s requested for %s (now %s)\n", action, r.ID, r.State)
	return nil
}

// replay approves a token and follows the replay to its end (follow.go:
// handed to the running workers, or run in this process when none is).
func (a *app) replay(ctx context.Context, out *output, stderr io.Writer, c commands.ReplayCmd) error {
	ap, err := a.ops.Approve(ctx, a.caller, ops.Approval{Token: c.Token, Params: c.Params})
	if err != nil {
		if rf, ok := ops.IsRefusal(err); ok && rf.Code == ops.Changed {
			if out.json {
				return out.failDoc(failed(err), map[string]any{"changes": rf.Changes})
			}
			fmt.Fprintln(out.w, "The DLQ or its targets changed since the preview:")
			for _, ch := range rf.Changes {
				fmt.Fprintln(out.w, "  -", ch.Detail)
			}
			fmt.Fprintln(out.w, "Nothing was sent. Run the preview again and replay its new token.")
			return failed(err)
		}
		return out.fail(failed(err))
	}
	r, err := a.follow(ctx, ap.Replay.ID, out, out.progress(stderr))
	if err != nil {
		return out.fail(failed(err))
	}
	return a.ended(out, r)
}

// resume asks for a paused or stopped replay to continue and follows it as
// replay does: handed to the running workers, or run here when none is
// running, so that a resume never just waits for nobody.
func (a *app) resume(ctx context.Context, out *output, stderr io.Writer, id string, action engine.ControlAction) error {
	// Record the wish only: follow hands the replay out or runs it here.
	if _, err := a.ops.Control(ctx, a.caller, action, id); err != nil {
		return out.fail(failed(err))
	}
	r, err := a.follow(ctx, id, out, out.progress(stderr))
	if err != nil {
		return out.fail(failed(err))
	}
	return a.ended(out, r)
}

// ended reports a followed replay's end; any end but finished is exit 1.
func (a *app) ended(out *output, r engine.Replay) error { return ended(out, r) }

// ended is the report of a replay that replay or resume followed, here or
// through the server. It exits 0 only for a replay that finished clean
// (engine.Replay.Clean): one that finished with copies back, or with
// copies nobody could see, exits 1 like one that stopped.
func ended(out *output, r engine.Replay) error {
	if out.json {
		if err := out.doc(r); err != nil {
			return err
		}
	} else {
		printReplay(out.w, r)
		printNext(out.w, r)
	}
	switch {
	case r.Clean():
		return nil
	case r.State == engine.StateFinished:
		return &exitError{code: exitFailed, err: fmt.Errorf("replay %s finished, verdict %s", r.ID, r.Verdict())}
	}
	return &exitError{code: exitFailed, err: fmt.Errorf("replay %s %s", r.ID, r.State)}
}

// followStatus is status --follow: it shows a replay's progress until it
// ends or stops (one live line on a terminal, plain lines otherwise — on
// stderr with --json), then its status. The exit status is 0 when it
// finished or when the follower detached (Ctrl-C), 1 when it stopped, was
// cancelled or was interrupted.
func (a *app) followStatus(ctx context.Context, out *output, stderr io.Writer, id string) error {
	plain := out.w
	if out.json {
		plain = stderr
	}
	r, err := a.watch(ctx, id, out.progress(plain), 250*time.Millisecond)
	if err != nil {
		return out.fail(failed(err))
	}
	return watched(out, r)
}

// watched is the report of a replay status --follow followed, here or
// through the server.
func watched(out *output, r engine.Replay) error {
	if out.json {
		if err := out.doc(r); err != nil {
			return err
		}
	} else {
		printReplay(out.w, r)
		printNext(out.w, r)
	}
	if (r.State.Terminal() && r.State != engine.StateFinished) || r.State == engine.StateStopped {
		return &exitError{code: exitFailed, err: fmt.Errorf("replay %s %s", r.ID, r.State)}
	}
	return nil
}

// output writes the terminal's results: text, or exactly one JSON document.
type output struct {
	w    io.Writer
	json bool
	// details asks preview for its mechanics (--details).
	details bool
	done    bool
	// tty is set when w is a terminal: progress is then one line redrawn
	// in place on w (unless json); stderr takes plain progress lines
	// otherwise.
	tty    bool
	getenv func(string) string
	// screen is shared with the log's writer, which writes above the
	// live line; log logs a failure's whole chain at debug.
	screen *screen
	log    zerolog.Logger
}

// progress returns where a followed replay's progress goes: one live line
// on a terminal, else plain lines on plain (stderr for replay).
func (o *output) progress(plain io.Writer) *liveLine {
	getenv := o.getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	var l *liveLine
	if o.tty && !o.json {
		l = newLiveLine(o.w, true, getenv)
	} else {
		l = newLiveLine(plain, false, getenv)
	}
	l.scr = o.screen
	return l
}

func (o *output) doc(v any) error {
	if o.done {
		return nil
	}
	o.done = true
	enc := json.NewEncoder(o.w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// fail reports err: as a JSON document with an "error" field, or as text.
func (o *output) fail(err error) error {
	return o.failDoc(err, nil)
}

func (o *output) failDoc(err error, extra map[string]any) error {
	if o.json {
		doc := map[string]any{"error": err.Error()}
		var rr *remoteRefusal
		if r, ok := ops.IsRefusal(err); ok {
			doc["code"] = r.Code // a refusal's code, for scripts
		} else if errors.As(err, &rr) {
			doc["code"] = rr.code()
		}
		for k, v := range extra {
			doc[k] = v
		}
		_ = o.doc(doc)
	} else {
		o.log.Debug().Err(err).Msg("the whole error")
		fmt.Fprintln(o.w, "dlqbot:", sentence(err))
	}
	return err
}
