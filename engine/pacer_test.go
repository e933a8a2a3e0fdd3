package engine

import (
	"strings"
	"testing"
	"time"
)

// manualClock is a clock only the test moves.
type manualClock struct{ t time.Time }

func (c *manualClock) Now() time.Time { return c.t }
func (c *manualClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- c.t.Add(d)
	return ch
}

// TestPacerRates checks one controller decision per row: the pacer at
// rate start (max 200) saw ready0 at its last sample; within dt it
// published pub and now sees ready (consumers > 0 unless none).
func TestPacerRates(t *testing.T) {
	for _, c := range []struct {
		name             string
		start            float64
		ready0, pub      int
		dt               time.Duration
		ready, consumers int
		ok               bool
		lo, hi           float64
		status           string
	}{
		// Consumers ack all 25 sent in 0.5 s (50/s), nothing queued: raise
		// toward the setpoint (50/s + 50 backlog over a second), at most
		// double at once.
		{"idle consumer: increase", 50, 0, 25, 500 * time.Millisecond, 0, 1, true, 99, 101, "pacing to the consumer: 100 msg/s; backlog 0"},
		// 50 sent, 25 acked in 0.5 s (50/s), backlog 50 = one second: hold.
		{"at the setpoint: hold", 100, 25, 50, 500 * time.Millisecond, 50, 1, true, 49, 51, "backlog 50"},
		// Backlog 300 with acks of 50/s (limit 100): halve below the ack rate.
		{"backlog above two seconds: decrease", 100, 280, 50, 500 * time.Millisecond, 305, 1, true, 24, 26, "slowing"},
		// Live traffic fills the queue: 2,000 ready, the replay's 25 and
		// the consumers' acks cancel out: the floor.
		{"live traffic fills the queue", 50, 2000, 25, 500 * time.Millisecond, 2000, 1, true, PacerMinRate, 25, "slowing"},
		// A fast consumer: capped by max.
		{"fast consumer: at max", 150, 0, 75, 500 * time.Millisecond, 0, 4, true, 200, 200, "at max=200"},
		// No consumer: the fixed fallback rate, said so.
		{"no consumer: fallback", 100, 0, 50, 500 * time.Millisecond, 10, 0, true, 50, 50, "cannot be measured"},
		// The broker cannot say: the fallback.
		{"not inspectable: fallback", 100, 0, 50, 500 * time.Millisecond, 0, 0, false, 50, 50, "cannot be measured"},
		// A long gap (the replay waited between steps): no measurement,
		// the rate is kept.
		{"stale sample: keep", 80, 0, 0, 10 * time.Second, 0, 1, true, 80, 80, "80 msg/s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := &manualClock{t: time.Unix(1000, 0)}
			p := NewPacer(clk, 200, 50)
			p.Observe(c.ready0, 1, true)
			p.rate = c.start
			p.Published(c.pub)
			clk.t = clk.t.Add(c.dt)
			got := p.Observe(c.ready, c.consumers, c.ok)
			if got < c.lo || got > c.hi {
				t.Fatalf("rate %v, want %v..%v (%s)", got, c.lo, c.hi, p.Status())
			}
			if !strings.Contains(p.Status(), c.status) {
				t.Fatalf("status %q, want it to say %q", p.Status(), c.status)
			}
		})
	}
}

// TestPacerFollowsConsumer simulates a consumer acknowledging 50 msg/s
// (prefetch 10) fed by the pacer for 60 s, and live traffic of 30 msg/s
// arriving for ten of them: the backlog stays under three seconds of acks
// and the replay sends close to what the consumer takes.
func TestPacerFollowsConsumer(t *testing.T) {
	clk := &manualClock{t: time.Unix(1000, 0)}
	p := NewPacer(clk, 200, 50)
	const tick = 10 * time.Millisecond
	ready, prefetched, sent := 0.0, 0.0, 0.0
	credit, ackCredit := 0.0, 0.0
	worst := 0.0
	for i := 0; i < 6000; i++ {
		clk.t = clk.t.Add(tick)
		if p.Due() {
			p.Observe(int(ready), 1, true)
		}
		credit += p.Rate() * tick.Seconds()
		for credit >= 1 {
			credit--
			p.Published(1)
			sent++
			ready++
		}
		if s := float64(i) * tick.Seconds(); s >= 20 && s < 30 {
			ready += 30 * tick.Seconds() // live traffic
		}
		move := min(ready, 10-prefetched)
		ready, prefetched = ready-move, prefetched+move
		ackCredit += 50 * tick.Seconds()
		for ackCredit >= 1 && prefetched >= 1 {
			ackCredit--
			prefetched--
		}
		ackCredit = min(ackCredit, 1)
		if i > 100 {
			worst = max(worst, ready)
		}
	}
	if worst >= 150 {
		t.Fatalf("backlog reached %v, want under 150", worst)
	}
	// The consumer takes 50/s for 60 s, 300 of it live traffic.
	if sent < 0.8*(3000-300) {
		t.Fatalf("sent %v in 60 s, want at least %v", sent, 0.8*(3000-300))
	}
	t.Logf("sent %v, worst backlog %v, %s", sent, worst, p.Status())
}

// TestPacerDatesALateSample: a sample handed over after it was taken
// (ObserveAt, as the run hands over one taken beside its publishes) is
// measured over the time up to when it was taken, not up to its hand-over:
// the same rate as the sample taken and handed over at once.
func TestPacerDatesALateSample(t *testing.T) {
	rateAfter := func(late time.Duration) float64 {
		clk := &manualClock{t: time.Unix(1000, 0)}
		p := NewPacer(clk, 200, 50)
		p.Observe(0, 1, true)
		p.Published(25)
		taken := clk.t.Add(PacerWindow)
		clk.t = taken.Add(late)
		return p.ObserveAt(taken, 0, 1, true)
	}
	at, late := rateAfter(0), rateAfter(time.Second)
	if at != late || at < 99 || at > 101 {
		t.Fatalf("25 acked in %v: rate %v handed over at once, %v a second late; want both 100", PacerWindow, at, late)
	}
}

// TestPacerHoldsWhileASampleIsLate: while a sample is under way the pacer
// keeps its rate, until the sample is pacerStale old; then it sends one
// a second, and its own rate is back once a sample is observed.
func TestPacerHoldsWhileASampleIsLate(t *testing.T) {
	clk := &manualClock{t: time.Unix(1000, 0)}
	p := NewPacer(clk, 200, 50)
	p.Observe(0, 1, true)
	p.Published(25)
	clk.t = clk.t.Add(PacerWindow)
	rate := p.Observe(0, 1, true)
	began := clk.t
	if got := p.RateSampling(began); got != rate {
		t.Fatalf("a sample just begun: rate %v, want the pacer's %v", got, rate)
	}
	clk.t = began.Add(pacerStale - time.Millisecond)
	if got := p.RateSampling(began); got != rate {
		t.Fatalf("a sample out for %v: rate %v, want the pacer's %v", pacerStale-time.Millisecond, got, rate)
	}
	clk.t = began.Add(pacerStale)
	if got := p.RateSampling(began); got != PacerMinRate {
		t.Fatalf("a sample out for %v: rate %v, want %v", pacerStale, got, PacerMinRate)
	}
	if got := p.Rate(); got != rate {
		t.Fatalf("the late sample changed the pacer's own rate to %v, want %v", got, rate)
	}
}
