package engine

import (
	"fmt"
	"time"
)

// A replay with rate=auto (Params.Auto) paces to its targets' consumers:
// it samples the targets' ready count (a passive declare, exact and cheap)
// while it sends and derives what the consumers acknowledge from the
// change in that count and its own publishes since the last sample:
//
//	acked/s = (ready before + published since - ready now) / elapsed
//
// so no management statistics are needed. It then sets its rate so that
// the backlog it leaves settles at about one second of acknowledgements
// (pacerSetpoint) and halves it whenever the backlog is above two seconds
// of them (pacerLimit): live traffic that already fills the queue slows
// the replay to its floor. It never goes above Max. When the targets have
// no consumer or cannot be inspected it sends at the fixed Fallback rate
// (rate=auto is measured, never guessed).

// Pacer tuning.
const (
	// pacerWindow is how often the targets are sampled while sending.
	PacerWindow = 500 * time.Millisecond
	// pacerStale is the longest gap between samples whose difference still
	// measures the consumers (a replay waiting between steps sends
	// nothing, so the gap says nothing of them).
	pacerStale = 3 * PacerWindow
	// pacerSetpoint and pacerLimit are the backlog aimed at and the most
	// tolerated, in seconds of acknowledgements.
	pacerSetpoint = 1.0
	pacerLimit    = 2.0
	// pacerMinBacklog is the backlog never counted too much, however slow
	// the consumers (a few messages in the queue are no flood).
	pacerMinBacklog = 5
	// PacerMinRate is the slowest an auto replay sends, so that it keeps
	// measuring.
	PacerMinRate = 1.0
	// DefaultAutoMax is the highest rate=auto goes without max=.
	DefaultAutoMax = 500.0
)

// Pacer is the rate controller of an auto-paced replay. One goroutine uses
// it; its clock is injected so that it is tested without sleeping.
type Pacer struct {
	clock    Clock
	max      float64
	fallback float64

	rate      float64
	ack       float64 // estimated acknowledgements per second; <0 unknown
	published int64

	sampled   bool
	at        time.Time
	ready     int
	pubAt     int64
	backlog   int
	measuring bool
}

// NewPacer returns a pacer that never sends faster than max (DefaultAutoMax
// when max <= 0) and sends at fallback while its targets' consumers cannot
// be measured. It starts at fallback (at most max).
func NewPacer(clock Clock, max, fallback float64) *Pacer {
	if max <= 0 {
		max = DefaultAutoMax
	}
	if fallback <= 0 {
		fallback = DefaultRate
	}
	return &Pacer{clock: clock, max: max, fallback: fallback, rate: min(fallback, max), ack: -1}
}

// Rate is the current rate in messages per second.
func (p *Pacer) Rate() float64 { return p.rate }

// Published counts n publishes since the last sample.
func (p *Pacer) Published(n int) { p.published += int64(n) }

// Due reports whether a new sample of the targets is due.
func (p *Pacer) Due() bool {
	return !p.sampled || p.clock.Now().Sub(p.at) >= PacerWindow
}

// Observe takes a sample of the targets: their summed ready count and
// consumer count; ok=false when they could not be inspected. It returns
// the new rate.
func (p *Pacer) Observe(ready, consumers int, ok bool) float64 {
	return p.ObserveAt(p.clock.Now(), ready, consumers, ok)
}

// ObserveAt is Observe for a sample that ended at now, handed over at
// the first publish after it (a sample taken beside the publishes, not in
// their loop): the publishes counted so far (Published) are taken as
// those before the sample, which is true of all but the one under way
// when it ended.
func (p *Pacer) ObserveAt(now time.Time, ready, consumers int, ok bool) float64 {
	if !ok || consumers == 0 {
		// Nothing to measure: the fixed rate, and a fresh start later.
		p.sampled, p.measuring, p.ack = false, false, -1
		p.rate = min(p.fallback, p.max)
		p.backlog = max(ready, 0)
		return p.rate
	}
	prev, prevAt, prevPub := p.ready, p.at, p.pubAt
	fresh := p.sampled && now.Sub(prevAt) <= pacerStale && now.After(prevAt)
	p.sampled, p.at, p.ready, p.pubAt, p.backlog, p.measuring = true, now, ready, p.published, ready, true
	if !fresh {
		return p.rate
	}
	dt := now.Sub(prevAt).Seconds()
	acked := max(0, float64(prev)+float64(p.published-prevPub)-float64(ready)) / dt
	if p.ack < 0 {
		p.ack = acked
	} else {
		p.ack = 0.5*p.ack + 0.5*acked
	}
	limit := max(pacerLimit*p.ack, pacerMinBacklog)
	setpoint := max(pacerSetpoint*p.ack, pacerMinBacklog)
	var next float64
	if float64(ready) > limit {
		// Multiplicative decrease: the consumers are behind (or live
		// traffic fills the queue).
		next = min(p.rate, p.ack) / 2
	} else {
		// Send what they acknowledge, plus the gap to the setpoint over a
		// second; at most double at once (the ack rate measured is at
		// most what was sent).
		next = min(p.ack+(setpoint-float64(ready)), 2*p.rate+PacerMinRate)
	}
	p.rate = min(max(next, PacerMinRate), p.max)
	return p.rate
}

// RateSampling is the rate while a sample of the targets begun at began
// (on the pacer's clock) is still under way: the pacer's own until the
// sample is pacerStale old, then PacerMinRate until it ends. A sample is
// taken beside the publishes (a passive declare per target); one that
// does not come back, from a broker too loaded to answer for seconds,
// leaves the consumers unmeasured, and a replay going on at its last
// rate meanwhile could flood a consumer that slowed down.
func (p *Pacer) RateSampling(began time.Time) float64 {
	if p.clock.Now().Sub(began) >= pacerStale {
		return PacerMinRate
	}
	return p.rate
}

// StatusSampling is Status while a sample begun at began is under way:
// once it is late (RateSampling holds the publishes), it says so.
func (p *Pacer) StatusSampling(began time.Time) string {
	late := p.clock.Now().Sub(began)
	if late < pacerStale {
		return p.Status()
	}
	return fmt.Sprintf("pacing at %s msg/s: waiting for the target's count, asked %s ago (was %s msg/s); backlog %d",
		fmtRate(PacerMinRate), late.Round(100*time.Millisecond), fmtRate(p.rate), p.backlog)
}

// Status says what the pacer does and why, for the replay's progress:
// "pacing to the consumer: 48 msg/s; backlog 30".
func (p *Pacer) Status() string {
	if !p.measuring {
		return fmt.Sprintf("pacing at %s msg/s: the target's consumers cannot be measured (none, or the broker cannot say); backlog %d", fmtRate(p.rate), p.backlog)
	}
	why := ""
	switch {
	case p.rate >= p.max:
		why = fmt.Sprintf(" (at max=%s)", fmtRate(p.max))
	case p.ack >= 0 && float64(p.backlog) > max(pacerLimit*p.ack, pacerMinBacklog):
		why = " (slowing: the queue holds more than two seconds of what its consumers acknowledge)"
	}
	return fmt.Sprintf("pacing to the consumer: %s msg/s; backlog %d%s", fmtRate(p.rate), p.backlog, why)
}

// fmtRate prints a rate as a whole number, or with one decimal below 10.
func fmtRate(r float64) string {
	if r < 10 {
		return fmt.Sprintf("%.1f", r)
	}
	return fmt.Sprintf("%.0f", r)
}
