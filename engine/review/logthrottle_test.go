package review

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/rs/zerolog"
	"strings"
	"testing"
	"time"
)

// handClock is a Clock that moves only when told to.
type handClock struct{ t time.Time }

func (c *handClock) Now() time.Time { return c.t }

func (c *handClock) After(time.Duration) <-chan time.Time { return nil } // never used here

// logLines decodes the JSON lines zerolog wrote to buf.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	buf.Reset()
	return out
}

func TestWarnLogsTheFirstThenOnePerWindowWithTheSuppressedCount(t *testing.T) {
	clock := &handClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	var buf bytes.Buffer
	s := &Base{cfg: Config{Log: zerolog.New(&buf)}, d: Deps{Clock: clock}, logs: newLogThrottle(clock, logEvery)}
	boom := errors.New("connection refused")

	s.Warn("r_1", "orders.dlq", "inspect target", boom)
	lines := logLines(t, &buf)
	if len(lines) != 1 {
		t.Fatalf("%d lines for the first error, want 1", len(lines))
	}
	l := lines[0]
	if l["level"] != "warn" || l["replay_id"] != "r_1" || l["dlq"] != "orders.dlq" || l["op"] != "inspect target" ||
		l["error"] != "connection refused" || l["message"] != "inspect target failed" {
		t.Fatalf("first line %v", l)
	}
	if _, ok := l["suppressed"]; ok {
		t.Fatalf("first line counts suppressed errors: %v", l)
	}

	// The same kind again within the window: counted, not logged. Another
	// replay, or another operation of the same replay, is a kind of its own.
	for range 4 {
		clock.t = clock.t.Add(5 * time.Second)
		s.Warn("r_1", "orders.dlq", "inspect target", boom)
	}
	s.Warn("r_2", "orders.dlq", "inspect target", boom)
	s.Warn("r_1", "orders.dlq", "read target counters", boom)
	lines = logLines(t, &buf)
	if len(lines) != 2 || lines[0]["replay_id"] != "r_2" || lines[1]["op"] != "read target counters" {
		t.Fatalf("within the window: %v, want only r_2's and the other operation's first errors", lines)
	}

	// A window after the last one logged: logged, with the count.
	clock.t = clock.t.Add(10 * time.Second) // 30 s since the first
	s.Warn("r_1", "orders.dlq", "inspect target", boom)
	lines = logLines(t, &buf)
	if len(lines) != 1 || lines[0]["replay_id"] != "r_1" || lines[0]["suppressed"] != float64(4) {
		t.Fatalf("after the window: %v, want r_1's line with suppressed=4", lines)
	}

	// A kind that stops failing: its suppressed occurrences are still told,
	// once, the next time anything is logged a window later.
	clock.t = clock.t.Add(time.Second)
	s.Warn("r_1", "orders.dlq", "inspect target", boom) // suppressed
	clock.t = clock.t.Add(2 * logEvery)
	s.Warn("r_3", "other.dlq", "reap: read ledger", boom)
	lines = logLines(t, &buf)
	var swept, r3 bool
	for _, l := range lines {
		swept = swept || (l["replay_id"] == "r_1" && l["op"] == "inspect target" && l["suppressed"] == float64(1))
		r3 = r3 || (l["replay_id"] == "r_3" && l["error"] == "connection refused")
	}
	if len(lines) != 2 || !swept || !r3 {
		t.Fatalf("a window after r_1 stopped failing: %v, want its 1 suppressed error told and r_3's line", lines)
	}
	if len(s.logs.kinds) != 1 {
		t.Fatalf("%d kinds remembered, want only r_3's: idle kinds are forgotten", len(s.logs.kinds))
	}
}

func TestWarnIgnoresCancelledWorkAndLogsNothingByDefault(t *testing.T) {
	clock := &handClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	var buf bytes.Buffer
	s := &Base{cfg: Config{Log: zerolog.New(&buf)}, d: Deps{Clock: clock}, logs: newLogThrottle(clock, logEvery)}
	s.Warn("r_1", "q", "inspect dlq", fmt.Errorf("amqp: inspect q: %w", context.Canceled))
	if buf.Len() != 0 {
		t.Fatalf("a cancelled operation was logged: %s", buf.String())
	}
	// The zero Config logs nothing, and warn is safe to call.
	quiet := &Base{d: Deps{Clock: clock}, logs: newLogThrottle(clock, logEvery)}
	quiet.Warn("r_1", "q", "inspect dlq", errors.New("boom"))
}
