package main

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestLiveLine checks the two progress forms: on a terminal one line
// redrawn in place (carriage return, erase line, no newline until done),
// otherwise one plain line per change of progress.
func TestLiveLine(t *testing.T) {
	start := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	now := start
	r := engine.Replay{ID: "r_0123456789abcdef", State: engine.StateRunning, Step: 1, Total: 100, CreatedAt: start}
	steps := func(l *liveLine) {
		l.now = func() time.Time { return now }
		l.note("replay %s handed to 1 worker(s)", r.ID)
		for i := 1; i <= 4; i++ {
			now = now.Add(time.Second)
			l.update(r) // elapsed changes, progress does not
			r.Sent, r.Settled, r.Step = 10*i, 10*i-5, i
			l.update(r)
		}
		r.State = engine.StateFinished
		l.update(r)
		l.done()
	}

	var tty bytes.Buffer
	steps(newLiveLine(&tty, true, func(string) string { return "" }))
	out := tty.String()
	if got := strings.Count(out, "\n"); got != 2 { // the note, and the end
		t.Fatalf("%d newlines on a terminal, want 2:\n%q", got, out)
	}
	if got := strings.Count(out, eraseLine); got != 9 {
		t.Fatalf("%d redraws, want 9:\n%q", got, out)
	}
	last := out[strings.LastIndex(out, eraseLine)+len(eraseLine):]
	for _, want := range []string{"finished · step 4 · sent 40/100 · settled 35 · came back 0 · 10.0 msg/s · 4s\n"} {
		if last != want {
			t.Fatalf("last drawn line %q, want %q", last, want)
		}
	}
	for _, line := range strings.Split(out, eraseLine) {
		if n := len([]rune(strings.TrimSuffix(line, "\n"))); n > 79 && !strings.HasPrefix(line, "replay ") {
			t.Errorf("a redrawn line of %d characters wraps an 80-column terminal: %q", n, line)
		}
	}

	r = engine.Replay{ID: "r_0123456789abcdef", State: engine.StateRunning, Step: 1, Total: 100, CreatedAt: start}
	now = start
	var plain bytes.Buffer
	steps(newLiveLine(&plain, false, func(string) string { return "" }))
	lines := strings.Split(strings.TrimSpace(plain.String()), "\n")
	if strings.Contains(plain.String(), "\r") || strings.Contains(plain.String(), "\x1b") {
		t.Fatalf("control characters in plain lines:\n%q", plain.String())
	}
	// The note, the first state, four changes, finished.
	if len(lines) != 7 || !strings.HasPrefix(lines[6], "r_0123456789abcdef finished · step 4 · sent 40/100") {
		t.Fatalf("plain lines:\n%s", plain.String())
	}

	// A file is not a terminal; a pipe is not either.
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	if isTerminal(f) || isTerminal(pw) || isTerminal(&plain) {
		t.Fatal("a file, a pipe or a buffer taken for a terminal")
	}
}

// TestTerminalStatusFollow follows a replay run by another dlqbot process
// (in-process here) with status --follow: plain progress lines on stdout
// (not a terminal) until it finishes, then its status; with --json, the
// lines go to stderr and stdout holds one document.
func TestTerminalStatusFollow(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(30, 100)...)
	r.WaitCount(dlq, 30, 20*time.Second)
	r.Consume(src, func(amqp.Delivery) string { return "ack" })

	out, _, code := dlqbot(t, env, "preview", dlq, "--json")
	if code != 0 {
		t.Fatalf("preview exit %d:\n%s", code, out)
	}
	token := oneJSON(t, out)["token"].(string)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the replaying process, slowed so there is progress to follow
		defer wg.Done()
		if out, errs, code := dlqbot(t, env, "replay", token, "step=5", "rate=20", "timeout=20s", "--json"); code != 0 {
			t.Errorf("replay exit %d:\n%s\n%s", code, out, errs)
		}
	}()
	var id string
	testkit.Eventually(t, 30*time.Second, "the replay listed", func() bool {
		out, _, _ := dlqbot(t, env, "status", "--json")
		if rs, _ := oneJSON(t, out)["replays"].([]any); len(rs) == 1 {
			id, _ = rs[0].(map[string]any)["replay_id"].(string)
		}
		return id != ""
	})
	out, stderr, code := dlqbot(t, env, "status", id, "--follow")
	if code != 0 {
		t.Fatalf("status --follow exit %d:\n%s\n%s", code, out, stderr)
	}
	var progress []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, id+" ") {
			progress = append(progress, l)
		}
	}
	if len(progress) < 2 || !strings.Contains(progress[len(progress)-1], "finished · step") ||
		!strings.Contains(progress[len(progress)-1], "sent 30/30") || strings.ContainsAny(out, "\r\x1b") {
		t.Fatalf("progress lines %q in\n%s", progress, out)
	}
	if !strings.Contains(out, "Replay "+id+": finished") {
		t.Fatalf("no final status in\n%s", out)
	}
	wg.Wait()

	out, stderr, code = dlqbot(t, env, "status", id, "--follow", "--json")
	if code != 0 || oneJSON(t, out)["state"] != "finished" || !strings.Contains(stderr, id+" finished") {
		t.Fatalf("status --follow --json exit %d:\n%s\nstderr:\n%s", code, out, stderr)
	}
	for _, args := range [][]string{{"status", "--follow"}, {"preview", dlq, "--follow"}} {
		if _, _, code := dlqbot(t, env, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
