package main

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestStoppedReplayNamesTheNextCommands: a replay that stops by itself
// ends its readable report with the exact commands that apply (resume the
// rest, check, cancel), and without --verbose no log line below warn
// reaches stderr; with --verbose the log is there.
func TestStoppedReplayNamesTheNextCommands(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	r := testkit.Dial(t)
	src, dlq := r.DeadLettered(20, 50)
	rejecting := r.Consume(src, func(amqp.Delivery) string { return "reject" })

	out, _, code := dlqbot(t, env, "preview", dlq, "--json")
	if code != 0 {
		t.Fatalf("preview exit %d:\n%s", code, out)
	}
	token, _ := oneJSON(t, out)["token"].(string)
	out, stderr, code := dlqbot(t, env, "replay", token, "step=5", "rate=max", "timeout=20s")
	if code != 1 {
		t.Fatalf("replay exit %d, want 1:\n%s\n%s", code, out, stderr)
	}
	id := regexp.MustCompile(`Replay (r_[0-9a-z]+): stopped`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no stopped replay in the report:\n%s", out)
	}
	for _, want := range []string{"Next:", "dlqbot resume " + id[1] + " ", "send the 15 left anyway",
		"dlqbot check " + id[1] + " ", "dlqbot cancel " + id[1] + " "} {
		if !strings.Contains(out, want) {
			t.Errorf("the report does not name %q:\n%s", want, out)
		}
	}
	if strings.Contains(stderr, `"level":"info"`) || strings.Contains(stderr, `"level":"debug"`) {
		t.Errorf("log lines below warn without --verbose:\n%s", stderr)
	}

	// status of the stopped replay names them too.
	out, _, code = dlqbot(t, env, "status", id[1])
	if code != 0 || !strings.Contains(out, "dlqbot resume "+id[1]) {
		t.Fatalf("status exit %d:\n%s", code, out)
	}
	// --verbose, anywhere on the line, shows the engine's info lines on
	// stderr (each step's "cursor opened"), never on stdout.
	rejecting.Stop()
	r.Consume(src, func(amqp.Delivery) string { return "ack" })
	out, stderr, code = dlqbot(t, env, "resume", "--verbose", id[1], "--json")
	// It finishes with the copies that came back before the fix, so its
	// verdict is came_back and the exit status 1 (SPEC §10).
	if doc := oneJSON(t, out); code != 1 || doc["state"] != "finished" || doc["verdict"] != "came_back" {
		t.Fatalf("resume --verbose exit %d, want 1 (finished, came back):\n%s\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, `"level":"info"`) {
		t.Errorf("--verbose shows no info log line:\n%s", stderr)
	}
}

// TestLogLinesStayOutOfTheLiveLine: on a terminal a log line written
// while the progress line is drawn clears the line first, stands on a line
// of its own, and the progress line is drawn again after it.
func TestLogLinesStayOutOfTheLiveLine(t *testing.T) {
	var screenOut bytes.Buffer
	scr := &screen{}
	l := newLiveLine(&screenOut, true, func(string) string { return "" })
	l.scr = scr
	l.now = func() time.Time { return time.Unix(100, 0) }
	logs := scr.logs(&screenOut)
	r := engine.Replay{ID: "r_1", State: engine.StateRunning, Total: 10, Sent: 5, CreatedAt: time.Unix(90, 0)}
	l.update(r)
	fmt.Fprint(logs, `{"level":"warn","message":"x"}`+"\n")
	l.update(r)
	l.done()
	fmt.Fprint(logs, `{"level":"warn","message":"y"}`+"\n")
	got := screenOut.String()
	line := progressLine(r, time.Unix(100, 0), false)
	want := eraseLine + line + eraseLine + `{"level":"warn","message":"x"}` + "\n" + line + eraseLine + line + "\n" + `{"level":"warn","message":"y"}` + "\n"
	if got != want {
		t.Fatalf("screen:\n%q\nwant\n%q", got, want)
	}
}

// TestErrorsReadAsOneSentence: a failure is worded as what failed and
// its innermost cause, not the chain of wrappers.
func TestErrorsReadAsOneSentence(t *testing.T) {
	cause := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("engine: preview q: %w", fmt.Errorf("amqp: inspect q: %w: %w", engine.ErrBrokerUnavailable, cause)),
			"RabbitMQ could not be reached (dial tcp 127.0.0.1:1: connect: connection refused)."},
		{failed(fmt.Errorf("store: load: %w", fmt.Errorf("%w: %w", engine.ErrStoreUnavailable, cause))),
			"Redis could not be reached (dial tcp 127.0.0.1:1: connect: connection refused)."},
		{fmt.Errorf("ops: a: %w", fmt.Errorf("b: %w", errors.New("disk full"))), "It failed (disk full)."},
	} {
		if got := sentence(c.err); got != c.want {
			t.Errorf("%v:\n got %q\nwant %q", c.err, got, c.want)
		}
	}
}

// TestNextCommandsOnlyThoseThatApply: each state names the commands that
// can do something — never resume or cancel with nothing left to send.
func TestNextCommandsOnlyThoseThatApply(t *testing.T) {
	for _, c := range []struct {
		name      string
		r         engine.Replay
		want, not []string
	}{
		{"stopped with 15 left", engine.Replay{ID: "r_1", State: engine.StateStopped, Total: 20, Sent: 5},
			[]string{"dlqbot resume r_1 ", "send the 15 left anyway", "dlqbot check r_1", "dlqbot cancel r_1"}, nil},
		{"stopped with nothing left", engine.Replay{ID: "r_1", State: engine.StateStopped, Total: 20, Sent: 20},
			[]string{"dlqbot check r_1"}, []string{"resume", "cancel"}},
		{"stopped with copies in doubt", engine.Replay{ID: "r_1", State: engine.StateStopped, Total: 20, Sent: 18, InDoubt: 2},
			[]string{"dlqbot resume r_1 resend=in-doubt", "dlqbot cancel r_1"}, []string{"left"}},
		{"paused before sending", engine.Replay{ID: "r_1", State: engine.StatePaused, Total: 20},
			[]string{"dlqbot resume r_1 ", "dlqbot cancel r_1"}, []string{"check", "anyway"}},
		{"running", engine.Replay{ID: "r_1", State: engine.StateRunning, Total: 20, Sent: 5},
			[]string{"dlqbot status r_1 --follow", "dlqbot pause r_1", "dlqbot cancel r_1"}, []string{"resume"}},
		{"finished", engine.Replay{ID: "r_1", State: engine.StateFinished, Total: 20, Sent: 20},
			[]string{"dlqbot check r_1"}, []string{"resume", "cancel", "pause"}},
		{"cancelled before sending", engine.Replay{ID: "r_1", State: engine.StateCancelled, Total: 20},
			nil, []string{"Next:"}},
	} {
		var b bytes.Buffer
		printNext(&b, c.r)
		got := b.String() + "\n"
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: no %q in\n%s", c.name, w, got)
			}
		}
		for _, n := range c.not {
			if strings.Contains(got, n) {
				t.Errorf("%s: %q offered in\n%s", c.name, n, got)
			}
		}
	}
}
