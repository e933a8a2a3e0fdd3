package replay_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// logBuffer is a log destination a test reads while the engine writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the lines that contain every one of parts.
func (l *logBuffer) lines(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range strings.Split(l.b.String(), "\n") {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

// countedStats counts the management API reads of each queue.
type countedStats struct {
	engine.CounterReader
	mu sync.Mutex
	n  map[string]int
}

func (c *countedStats) Counters(ctx context.Context, q string) (engine.QueueCounters, error) {
	c.mu.Lock()
	c.n[q]++
	c.mu.Unlock()
	return c.CounterReader.Counters(ctx, q)
}

func (c *countedStats) of(q string) int { c.mu.Lock(); defer c.mu.Unlock(); return c.n[q] }

// TestATargetDeletedWhileAStepSettlesIsLoggedOncePerWindow deletes the
// target queue of a settling step: looking at it fails at every poll. The
// engine logs that with the replay's id, once per 30 s of its clock, with
// the count of the failures it did not log.
func TestATargetDeletedWhileAStepSettlesIsLoggedOncePerWindow(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, b testkit.Broker) {
		t.Parallel()
		logs, clock := &logBuffer{}, &shiftClock{}
		cfg := fast
		cfg.Log = zerolog.New(logs)
		var stats *countedStats
		e := newTapEnv(t, b, cfg, func(d *replay.Deps) {
			stats = &countedStats{CounterReader: d.Counters, n: map[string]int{}}
			d.Counters, d.Clock = stats, clock
		})
		// A step timeout far beyond the window: the step is still settling
		// when the clock has moved on a window.
		id, src, _, done := settlingWith(t, e, engine.Params{Rate: -1, Timeout: 1000 * time.Hour})
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("the replay's log lines:\n%s", strings.Join(logs.lines(id), "\n"))
			}
		})
		e.rabbit.DeleteQueue(src)
		kind := []string{`"replay_id":"` + id + `"`, `"op":"inspect target"`}
		testkit.Eventually(t, 20*time.Second, "a log line naming the replay and the deleted target", func() bool {
			return len(logs.lines(append(kind, src, "queue not found")...)) > 0
		})
		polled := stats.of(src)
		testkit.Eventually(t, 20*time.Second, "three more polls of the deleted target", func() bool { return stats.of(src) >= polled+3 })
		if n := len(logs.lines(kind...)); n != 1 {
			t.Fatalf("%d lines for the deleted target within the window, want 1", n)
		}
		clock.Advance(30 * time.Second) // a window later
		testkit.Eventually(t, 20*time.Second, "the next line, with the count of those not logged", func() bool {
			return len(logs.lines(append(kind, `"suppressed":`)...)) > 0
		})
		line := logs.lines(append(kind, `"suppressed":`)...)[0]
		if strings.Contains(line, `"suppressed":1,`) || strings.Contains(line, `"suppressed":2,`) {
			t.Fatalf("the second line counts fewer than the 3 polls between: %s", line)
		}
		if _, err := e.svc.Control(context.Background(), id, engine.ControlCancel, "U_CANCELLER"); err != nil {
			t.Fatal(err)
		}
		<-done
	})
}

// TestALongSettleGraceEndsWhenTheClockMovesOn gives a step an hour's
// grace for returns: the replay finishes once the engine's clock has
// moved on an hour, without the test waiting for it.
func TestALongSettleGraceEndsWhenTheClockMovesOn(t *testing.T) {
	t.Parallel()
	clock := &shiftClock{}
	cfg := fast
	cfg.SettleGrace = time.Hour
	e := newTapEnv(t, testkit.Rabbit3, cfg, func(d *replay.Deps) { d.Clock = clock })
	r := e.rabbit
	src, dlq := r.DeadLettered(10, 50)
	got := &counter{}
	r.Consume(src, got.handle)
	p := preview(t, &e.env, engine.Selection{DLQ: dlq})
	ctx := context.Background()
	// A step timeout far beyond the grace: only the grace can end the step.
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Step: 100, Cap: 100, Rate: -1, Timeout: 1000 * time.Hour}, false)
	if err != nil {
		t.Fatal(err)
	}
	done := runAsync(t, &e.env, ap.Replay.ID)
	testkit.Eventually(t, 20*time.Second, "the 10 copies delivered", func() bool { return got.n.Load() == 10 })
	delivered := clock.Now()
	var rep engine.Replay
	testkit.Eventually(t, 20*time.Second, "the replay to finish as the clock moves on", func() bool {
		select {
		case rep = <-done:
			return true
		default:
			clock.Advance(5 * time.Minute)
			return false
		}
	})
	if rep.State != engine.StateFinished || rep.Sent != 10 || rep.Settled != 10 {
		t.Fatalf("replay: state %s, sent %d, settled %d: %s; want finished, 10 sent and settled", rep.State, rep.Sent, rep.Settled, rep.Note)
	}
	if waited := rep.EndedAt.Sub(delivered); waited < time.Hour {
		t.Fatalf("the replay ended %s (by its clock) after its copies were delivered, within the hour's grace", waited)
	}
}
