package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/stroma/dlqbot/engine"
)

// liveLine shows a replay's progress while the terminal follows it. On a
// terminal it keeps one line redrawn in place (carriage return and
// erase-line); otherwise it prints a plain line each time the progress
// changes, for logs and pipes.
type liveLine struct {
	mu    sync.Mutex // log lines are written above the line from other goroutines
	w     io.Writer
	tty   bool
	width int // columns a redrawn line may use
	now   func() time.Time
	last  string // what the plain line last showed (without rate and elapsed)
	drawn bool   // a live line is on screen, without its newline
	line  string // what the live line shows
	scr   *screen
}

// eraseLine returns the cursor to the start of the line and clears it.
const eraseLine = "\r\x1b[2K"

// newLiveLine writes to w, redrawing in place when tty is true.
// The line is cut to the terminal's width: COLUMNS when the shell exports
// it, else 80 (a wrapped line could not be redrawn in place).
func newLiveLine(w io.Writer, tty bool, getenv func(string) string) *liveLine {
	width := 80
	if n, err := strconv.Atoi(getenv("COLUMNS")); err == nil && n >= 20 {
		width = n
	}
	return &liveLine{w: w, tty: tty, width: width, now: time.Now}
}

// isTerminal reports whether w is a terminal (a character device), without
// a terminal library.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// update shows r's progress.
func (l *liveLine) update(r engine.Replay) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tty {
		line := progressLine(r, l.now(), false)
		if utf8.RuneCountInString(line) > l.width-1 {
			line = clip(line, l.width-1)
		}
		fmt.Fprint(l.w, eraseLine+line)
		l.drawn, l.line = true, line
		l.scr.show(l)
		return
	}
	if key := progressKey(r); key != l.last {
		l.last = key
		fmt.Fprintln(l.w, progressLine(r, l.now(), true))
	}
}

// note prints a line of its own above the live line.
func (l *liveLine) note(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.drawn {
		fmt.Fprint(l.w, eraseLine)
		l.drawn = false
	}
	fmt.Fprintf(l.w, format+"\n", args...)
}

// done ends the live line, so what follows starts on a line of its own.
func (l *liveLine) done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.scr.show(nil)
	if l.drawn {
		fmt.Fprintln(l.w)
		l.drawn = false
	}
}

// above runs write (a log line) with the live line cleared, and draws the
// line again after it, so that the log line stands on a line of its own.
func (l *liveLine) above(write func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.tty || !l.drawn {
		write()
		return
	}
	fmt.Fprint(l.w, eraseLine)
	write()
	fmt.Fprint(l.w, l.line)
}

// progressLine is one line of progress: (the replay id,) state, step,
// sent, settled, came back, the rate since the replay was created, and the
// time elapsed.
func progressLine(r engine.Replay, now time.Time, withID bool) string {
	elapsed := elapsedOf(r, now)
	var b strings.Builder
	if withID {
		b.WriteString(r.ID + " ")
	}
	fmt.Fprintf(&b, "%s · step %d · sent %d/%d · settled %d · came back %d", r.State, r.Step, r.Sent, r.Total, r.Settled, r.Returned)
	if r.Unseen != nil {
		fmt.Fprintf(&b, " (could not tell for %d: no tap)", r.Unseen.Count)
	}
	if r.Missing > 0 {
		fmt.Fprintf(&b, " · !! %d MISSING (neither sent by dlqbot nor in the DLQ)", r.Missing)
	}
	if r.Failed > 0 {
		fmt.Fprintf(&b, " · not delivered %d", r.Failed)
	}
	if elapsed >= time.Second {
		fmt.Fprintf(&b, " · %.1f msg/s", float64(r.Sent)/elapsed.Seconds())
	}
	fmt.Fprintf(&b, " · %s", elapsed.Truncate(time.Second))
	if r.Note != "" { // while running: waiting for the broker after a lost node
		b.WriteString(" · " + r.Note)
	}
	if r.Pace != "" && r.State == engine.StateRunning {
		b.WriteString(" · " + r.Pace)
	}
	return b.String()
}

// progressKey is what a plain progress line is printed again for.
func progressKey(r engine.Replay) string {
	return fmt.Sprintf("%s %s %d %d %d %d %d %d %s", r.ID, r.State, r.Step, r.Sent, r.Settled, r.Returned, r.Missing, r.Failed, r.Note)
}

// elapsedOf is how long the replay has run: until it ended, or until now.
func elapsedOf(r engine.Replay, now time.Time) time.Duration {
	if r.CreatedAt.IsZero() {
		return 0
	}
	end := now
	if !r.EndedAt.IsZero() {
		end = r.EndedAt
	}
	return max(end.Sub(r.CreatedAt), 0)
}

// lockedWriter serialises writes to w: progress lines and the engine's log
// lines share stderr and are written from different goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
