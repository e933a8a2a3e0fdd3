package review

import (
	"context"
	"errors"
	"github.com/rs/zerolog"
	"github.com/stroma/dlqbot/engine"
	"sync"
	"time"
)

// logEvery is how often an error that keeps happening is logged again
// (per kind: replay, DLQ and operation).
const logEvery = 30 * time.Second

// logKind is what makes two errors "the same" for the throttle.
type logKind struct{ replay, dlq, op string }

// logCount is one kind's state: when it was last logged and last seen, and
// how many occurrences were not logged since.
type logCount struct {
	logged, seen time.Time
	suppressed   int
}

// logThrottle decides which occurrences of a repeated background error are
// logged, so a broker or store outage during a long settle or a reaper loop
// is told without flooding the log: the first of a kind at once, then at
// most one per window, carrying how many were suppressed before it. A kind
// not seen for a window is forgotten; if it had suppressed occurrences,
// they are handed back once (swept) so that they can still be counted in
// the log. Time is the injected Clock's.
type logThrottle struct {
	clock  engine.Clock
	window time.Duration
	mu     sync.Mutex
	kinds  map[logKind]*logCount
	swept  time.Time
}

func newLogThrottle(clock engine.Clock, window time.Duration) *logThrottle {
	return &logThrottle{clock: clock, window: window, kinds: map[logKind]*logCount{}}
}

// swept is a forgotten kind with occurrences that were never logged.
type swept struct {
	kind       logKind
	suppressed int
}

// admit records an occurrence of k and reports whether to log it, with how
// many occurrences of k were suppressed since the last one logged, and the
// kinds forgotten meanwhile that still had suppressed occurrences.
func (t *logThrottle) admit(k logKind) (log bool, suppressed int, gone []swept) {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.swept) >= t.window {
		t.swept = now
		for kk, c := range t.kinds {
			if kk != k && now.Sub(c.seen) >= t.window {
				if c.suppressed > 0 {
					gone = append(gone, swept{kk, c.suppressed})
				}
				delete(t.kinds, kk)
			}
		}
	}
	c := t.kinds[k]
	if c == nil {
		t.kinds[k] = &logCount{logged: now, seen: now}
		return true, 0, gone
	}
	c.seen = now
	if now.Sub(c.logged) < t.window {
		c.suppressed++
		return false, 0, gone
	}
	suppressed, c.logged, c.suppressed = c.suppressed, now, 0
	return true, suppressed, gone
}

// warn logs a background error that the engine carries on after (the
// operation is retried or its result is not needed), rate-limited by the
// service's throttle. replay and dlq may be empty when not known. An error
// from a cancelled context is not a failure (a pause, a cancel or a
// shutdown cut the operation short) and is not logged.
func (s *Base) Warn(replay, dlq, op string, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	log, n, gone := s.logs.admit(logKind{replay, dlq, op})
	for _, g := range gone {
		s.logFor(g.kind).Int("suppressed", g.suppressed).
			Msgf("%s failed %d more time(s) without being logged", g.kind.op, g.suppressed)
	}
	if !log {
		return
	}
	ev := s.logFor(logKind{replay, dlq, op}).Err(err)
	if n > 0 {
		ev = ev.Int("suppressed", n)
	}
	ev.Msg(op + " failed")
}

// logFor starts a warning carrying k's fields (replay_id, dlq, op).
func (s *Base) logFor(k logKind) *zerolog.Event {
	ev := s.cfg.Log.Warn().Str("op", k.op)
	if k.replay != "" {
		ev = ev.Str("replay_id", k.replay)
	}
	if k.dlq != "" {
		ev = ev.Str("dlq", k.dlq)
	}
	return ev
}
