package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/client"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// screen is what a person watching the terminal sees: dlqbot's log lines
// and the live progress line share it. A log line never lands inside the
// live line: it clears the line first and the line is drawn again under
// it.
type screen struct {
	live atomic.Pointer[liveLine] // the live line, while one is shown
}

// show makes l the live line log lines go above; nil when it is done.
func (s *screen) show(l *liveLine) {
	if s != nil {
		s.live.Store(l)
	}
}

// logs returns the writer dlqbot's log lines go to: w (stderr), each
// write made above the live line when one is drawn.
func (s *screen) logs(w io.Writer) io.Writer { return &screenLog{s: s, w: w} }

type screenLog struct {
	s *screen
	w io.Writer
}

func (l *screenLog) Write(p []byte) (int, error) {
	if live := l.s.live.Load(); live != nil {
		var n int
		var err error
		live.above(func() { n, err = l.w.Write(p) })
		return n, err
	}
	return l.w.Write(p)
}

// terminalLevel is the terminal's log level: warnings and errors only,
// unless --verbose asks for everything down to debug (where a failure's
// whole chain of causes is logged).
func terminalLevel(verbose bool) zerolog.Level {
	if verbose {
		return zerolog.DebugLevel
	}
	return zerolog.WarnLevel
}

// sentence is err for a person, in one sentence: a refusal's or a usage
// mistake's sentence as written; a failure as what could not be reached
// or done and its cause (the innermost error), not the chain of wrappers
// ("engine: preview q: amqp: inspect: …"), which the log keeps at debug.
func sentence(err error) string {
	var ee *exitError
	if errors.As(err, &ee) && ee.code == exitUsage {
		return err.Error() // written for people where it is made
	}
	if r, ok := ops.IsRefusal(err); ok {
		return r.Reason
	}
	var rr *remoteRefusal
	if errors.As(err, &rr) {
		return rr.Error()
	}
	what := "It failed"
	switch {
	case errors.Is(err, client.ErrUnreachable):
		what = "The dlqbot server cannot be reached"
	case errors.Is(err, engine.ErrBrokerUnavailable):
		what = "RabbitMQ could not be reached"
	case errors.Is(err, engine.ErrStoreUnavailable):
		what = "Redis could not be reached"
	case errors.Is(err, context.DeadlineExceeded):
		what = "It took too long and was given up"
	case errors.Is(err, context.Canceled):
		return "Interrupted."
	}
	cause := rootCause(err)
	if cause == "" || strings.EqualFold(cause, what) {
		return what + "."
	}
	return what + " (" + strings.TrimSuffix(cause, ".") + ")."
}

// rootCause is the innermost error's text: what went wrong at the bottom
// of a chain of wrappers.
func rootCause(err error) string {
	for {
		var next error
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			if es := u.Unwrap(); len(es) > 0 {
				next = es[0]
			}
		}
		if next == nil {
			return err.Error()
		}
		// A sentinel of ours says less than the text that wrapped it.
		if isSentinel(next) {
			return lastPart(err.Error(), next.Error())
		}
		err = next
	}
}

// isSentinel reports whether err is one of the engine's or client's
// sentinel errors (a category, not a cause).
func isSentinel(err error) bool {
	for _, s := range []error{engine.ErrBrokerUnavailable, engine.ErrStoreUnavailable, client.ErrUnreachable} {
		if err == s {
			return true
		}
	}
	return false
}

// lastPart is the text after sentinel in s ("…: broker unavailable: dial
// tcp …" gives "dial tcp …"), or the last ": " part of s.
func lastPart(s, sentinel string) string {
	if i := strings.LastIndex(s, sentinel); i >= 0 {
		if rest := strings.TrimLeft(s[i+len(sentinel):], ": "); rest != "" {
			return rest
		}
	}
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

// printNext names the exact commands that apply to r as it is now: after
// a stop, resume (when anything is left to send), check and cancel; after
// a pause, resume and cancel; while it runs, follow, pause and cancel;
// after its end, check. Nothing is offered that would do nothing.
func printNext(w io.Writer, r engine.Replay) {
	left := max(r.Total-r.Sent-r.Missing-r.Failed-r.InDoubt, 0)
	p := "dlqbot"
	var lines [][2]string
	add := func(cmd, why string) { lines = append(lines, [2]string{cmd, why}) }
	switch r.State {
	case engine.StateStopped, engine.StatePaused:
		if left > 0 {
			why := fmt.Sprintf("send the %d left", left)
			if r.State == engine.StateStopped {
				why += " anyway"
			}
			add(fmt.Sprintf("%s resume %s", p, r.ID), why)
		}
		if r.InDoubt > 0 {
			add(fmt.Sprintf("%s resume %s resend=in-doubt", p, r.ID), fmt.Sprintf("send the %d in doubt again first, marked as possible duplicates", r.InDoubt))
		}
		if r.Sent > 0 {
			add(fmt.Sprintf("%s check %s", p, r.ID), "what came back, grouped by failure")
		}
		if left > 0 || r.InDoubt > 0 {
			add(fmt.Sprintf("%s cancel %s", p, r.ID), "end it; what was not sent stays in the DLQ")
		}
	case engine.StateQueued, engine.StateRunning:
		add(fmt.Sprintf("%s status %s --follow", p, r.ID), "follow it again")
		add(fmt.Sprintf("%s pause %s", p, r.ID), "pause it; what was not sent stays in the DLQ")
		add(fmt.Sprintf("%s cancel %s", p, r.ID), "end it; what was not sent stays in the DLQ")
	default:
		if r.Sent > 0 {
			add(fmt.Sprintf("%s check %s", p, r.ID), "what came back, grouped by failure")
		}
	}
	if len(lines) == 0 {
		return
	}
	width := 0
	for _, l := range lines {
		width = max(width, len(l[0]))
	}
	fmt.Fprintln(w, "Next:")
	for _, l := range lines {
		fmt.Fprintf(w, "  %-*s   %s\n", width, l[0], l[1])
	}
}
