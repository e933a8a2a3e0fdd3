package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// parkReport is what a park moved, as the terminal shows it.
type parkReport engine.ParkResult

// replayIDPattern is what a replay id looks like (the grammar's opaque
// values).
var replayIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{4,80}$`)

// parkArgs recognises `dlqbot park <replay> [--json] [--verbose]`, a
// terminal word of its own (Slack parks with the Park button): ok is
// false when args are not a park; id is "" with a usage problem in msg.
func parkArgs(args []string) (id string, jsonOut, verbose, ok bool, msg string) {
	var rest []string
	for _, a := range args {
		switch a {
		case "--json", "-json":
			jsonOut = true
		case "--verbose", "-verbose", "-v":
			verbose = true
		default:
			rest = append(rest, a)
		}
	}
	if len(rest) > 0 && rest[0] == "dlqbot" {
		rest = rest[1:]
	}
	if len(rest) == 0 || rest[0] != "park" {
		return "", jsonOut, verbose, false, ""
	}
	switch {
	case len(rest) != 2:
		return "", jsonOut, verbose, true, "park takes one replay id: dlqbot park <replay> (dlqbot status lists them)"
	case !replayIDPattern.MatchString(rest[1]):
		return "", jsonOut, verbose, true, fmt.Sprintf("`%s` is not a replay id (4 to 80 letters, digits, - or _); dlqbot status lists the replays", rest[1])
	}
	return rest[1], jsonOut, verbose, true, ""
}

// park moves a replay's returned copies at the park limit to the DLQ's
// parking queue: through the server with DLQBOT_SERVER, else directly
// (the operator's mode). Exit 1 when refused or when some copies were not
// moved.
func park(ctx context.Context, cfg config, id string, out *output, stderr io.Writer) error {
	var res parkReport
	if cfg.Server != "" {
		r, err := newRemote(cfg, ops.FrontTerminal).c.Park(ctx, id)
		if err != nil {
			return out.fail(remoteErr(err))
		}
		res = parkReport(r)
	} else {
		if err := checkDirect(cfg, "dlqbot park"); err != nil {
			return out.fail(err)
		}
		a, err := newApp(cfg, stderr, false)
		if err != nil {
			return out.fail(err)
		}
		defer a.Close()
		if err := a.terminalOps(); err != nil {
			return out.fail(err)
		}
		if err := a.ping(ctx); err != nil {
			return out.fail(failed(err))
		}
		r, err := a.ops.Park(ctx, a.caller, id)
		if _, refused := ops.IsRefusal(err); err != nil && !refused {
			err = fmt.Errorf("%w (%d moved before it failed; the rest stay in the DLQ)", err, r.Parked)
		}
		if err != nil {
			return out.fail(failed(err))
		}
		res = parkReport(r)
	}
	if out.json {
		if err := out.doc(res); err != nil {
			return err
		}
	} else {
		res.print(out.w)
	}
	if res.Failed > 0 || res.InDoubt > 0 {
		return failed(fmt.Errorf("replay %s: %d copies not parked", id, res.Failed+res.InDoubt))
	}
	return nil
}

func (r parkReport) print(w io.Writer) {
	var notes []string
	if r.Duplicates > 0 {
		notes = append(notes, fmt.Sprintf("%d duplicate(s): their originals are back in the DLQ too", r.Duplicates))
	}
	if r.InDoubt > 0 {
		notes = append(notes, fmt.Sprintf("%d in doubt (the connection was lost): their originals stay in the DLQ", r.InDoubt))
	}
	if r.Failed > 0 {
		notes = append(notes, fmt.Sprintf("%d refused by the broker: their originals stay in the DLQ", r.Failed))
	}
	fmt.Fprintf(w, "Replay %s: parked %d copy(ies) in %s.\n", r.ReplayID, r.Parked, r.Queue)
	if len(notes) > 0 {
		fmt.Fprintf(w, "  %s\n", strings.Join(notes, "; "))
	}
}
