package replay

import (
	"context"

	"github.com/stroma/dlqbot/engine"
)

// recount asks the run to count its duplicates and copies in doubt again
// against the DLQ before it sends (see above). A run that resends the
// copies in doubt does not: its copies are the ones in doubt, and on a DLQ
// with a delivery limit the resend needs the reads a count would spend;
// what it says of its duplicates' originals is then the last count's
// (CountStale) unless the mark proves the DLQ unchanged.
func (rn *run) recount(ctx context.Context) {
	mark := rn.r.CountMark
	rn.r.CountMark = nil // this run's own acks make it stale
	resending := rn.rec.rs.left() > 0
	if rn.r.Unreconciled || (rn.r.Duplicates == 0 && (resending || rn.r.InDoubt == 0)) {
		return
	}
	if mark != nil && rn.unchangedSince(ctx, *mark, func() bool { return rn.stopCause(ctx) != nil }) {
		return
	}
	// A re-count only corrects the wording: on a DLQ whose reads spend
	// delivery attempts every read is owed to moving messages (the rest
	// of the replay, a later resend of the copies in doubt), so the
	// counts stand as the last count left them, and the replay says so.
	// A broker that cannot say leaves the count to reconcile, which
	// checks the budget again before it reads.
	if resending {
		rn.r.CountStale = true
		return
	}
	if st, err := rn.s.d.Broker.Inspect(ctx, rn.r.DLQ); err == nil && st.ReadsLeft() >= 0 {
		rn.r.CountStale = true
		return
	}
	rn.r.Unreconciled = true
}

// markCount leaves the DLQ's CountMark on a run that stops with
// duplicates or copies in doubt counted, waiting on the Clock for a sample
// that has caught up with the run's last read (at most three StatsLags);
// none is left when the broker cannot give one, or a shutdown cancels
// parent meanwhile (the wait never delays a drain). A pause leaves none
// (it is written at once), so the run after it counts again.
func (rn *run) markCount(parent context.Context) {
	rn.r.CountMark = nil
	if rn.r.Unreconciled || (rn.r.Duplicates == 0 && rn.r.InDoubt == 0) {
		return
	}
	ctx, cancel := context.WithTimeout(parent, 4*rn.s.cfg.Tune.StatsLag)
	defer cancel()
	m, ok := rn.freshMark(ctx, rn.hb.lost.Load)
	if ok {
		rn.r.CountMark = &m
	}
}

// unchangedSince reports whether the broker proves that nothing left the
// DLQ since mark: a sample that has caught up with now shows the same
// ready count and ack counter. Any doubt is false (count again).
func (rn *run) unchangedSince(ctx context.Context, mark engine.CountMark, stop func() bool) bool {
	if mark.SampledAt.IsZero() {
		return false
	}
	m, ok := rn.freshMark(ctx, stop)
	return ok && m.Ack == mark.Ack && m.Ready == mark.Ready && m.SampledAt.After(mark.SampledAt)
}

// freshMark reads the DLQ's CountMark from a management sample taken
// StatsLag after the call began, with no client holding or consuming its
// messages and the sample's ready count equal to the exact one; it polls
// every SettlePoll for at most three StatsLags. ok is false when none came
// or stop reported true meanwhile.
func (rn *run) freshMark(ctx context.Context, stop func() bool) (m engine.CountMark, ok bool) {
	clock := rn.s.d.Clock
	since := clock.Now()
	deadline := since.Add(3 * rn.s.cfg.Tune.StatsLag)
	for {
		st, err := rn.s.d.Broker.Inspect(ctx, rn.r.DLQ)
		if err != nil || !st.Exists {
			return m, false
		}
		cs, err := rn.s.d.Counters.Counters(ctx, rn.r.DLQ)
		if err != nil {
			return m, false
		}
		if !cs.SampledAt.IsZero() && !cs.Lapsed && cs.SampledAt.After(since.Add(rn.s.cfg.Tune.StatsLag)) {
			quiet := cs.Unacked == 0 && cs.Consumers == 0 && st.Consumers == 0 && cs.Ready == st.Ready
			return engine.CountMark{Ready: st.Ready, Ack: cs.Ack, SampledAt: cs.SampledAt}, quiet
		}
		if !clock.Now().Before(deadline) || stop() {
			return m, false
		}
		select {
		case <-ctx.Done():
			return m, false
		case <-clock.After(rn.s.cfg.SettlePoll):
		}
	}
}
