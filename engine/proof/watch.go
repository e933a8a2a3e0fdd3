package proof

import (
	"context"
	"errors"
	"time"
)

// The watch: approval without a read and without waiting. The
// management statistics lag the queue by up to a statistics interval, so a
// proof from them alone waits StatsLag after the click. A watch counts
// exactly, at once, what reached the DLQ since the preview: a queue bound
// as the DLQ is (Deps.Watches), opened by the preview before its read and
// read by no one. Every message that leaves the DLQ (acked, dropped,
// dead-lettered on, or held unacknowledged) is then missing from
//
//	ready at the preview + what the watch gained − ready now
//
// which is zero exactly when nothing left: a message that left and
// another that arrived in its place no longer cancel out (the gap in the
// statistics' proof). The watch is looked at after the DLQ at approval
// and before it at the preview, so a dead letter routed between two looks
// can only make the sum positive (compare), never hide a loss.
//
// What the watch cannot see is a message put into the DLQ other than
// through its bindings: a publish straight to it through the default
// exchange (a DLQ that a queue dead-letters into that way gets no watch),
// or through a binding added after the preview. A sum below zero shows
// such an arrival, and the approval then waits for the statistics instead;
// one that arrived just as a message left, within a statistics interval
// before the approval, cancels it unseen — the ack counter of the latest
// sample catches everything older. As with any proof the replay's own
// accounting stays the judge: a message that left is reported missing,
// never sent.
//
// The watch holds copies, at most WatchMaxLength (the adapter's bound: a
// full watch proves nothing), kept by the broker until the approval closes
// it, or for watchTTL when no one approves.

// watchTTL is how long the broker keeps a watch nobody approved (its
// x-expires, at most the token's life): an approval later than that proves
// by the statistics, or compares. Ten previews nobody approves keep at
// most ten watches of copies, for an hour.
const watchTTL = time.Hour

// openWatch opens a watch of dlq for pr; without one the proof waits for
// the statistics.
func (p *Prover) openWatch(ctx context.Context, dlq string, pr *Proof) {
	lk, err := p.d.Watches.OpenWatch(ctx, dlq, min(p.cfg.TokenTTL, watchTTL))
	if err != nil {
		if !errors.Is(err, p.cfg.Unsupported) {
			p.cfg.Log.Warn().Err(err).Str("dlq", dlq).Msg("preview: no watch for the approval's proof")
		}
		return
	}
	if lk.Consumers > 0 {
		p.Close(ctx, &Proof{Watch: lk.Watch})
		return
	}
	pr.Watch, pr.WatchArrived, pr.WatchReady = lk.Watch, lk.Arrived, lk.Ready
}

// Close deletes pr's watch, if any; a failure (or a ctx that ended:
// the caller is shutting down, and nothing here outlives it) leaves it to
// expire.
func (p *Prover) Close(ctx context.Context, pr *Proof) {
	if pr == nil || pr.Watch == "" {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.d.Watches.CloseWatch(cctx, pr.Watch); err != nil {
		p.cfg.Log.Warn().Err(err).Str("watch", pr.Watch).Msg("could not delete a watch queue; the broker deletes it when it expires")
	}
}

// proveByWatch is the watch's verdict on f (see above). decided is false
// when the watch cannot tell (none, gone, full, or an arrival it did not
// see): the statistics' proof is tried then. A sum above zero is waited
// on while it shrinks (a preview's give-backs landing late: a quorum DLQ,
// or the last windows of a large read), then decided against: compare.
func (p *Prover) proveByWatch(ctx context.Context, f Preview) (unchanged, decided bool) {
	pr := f.Proof
	if pr == nil || pr.Watch == "" {
		return false, false
	}
	clock := p.d.Clock
	start := clock.Now()
	// Give-backs landing shrink the sum; a message that left keeps it.
	// Wait while it shrinks (the preview's last windows of 1,000,000 took
	// longer than StatsLag to land), at most as long as the statistics'
	// proof would, and StatsLag without progress.
	most := min(max(3*p.cfg.StatsLag, 2*pr.Read), p.cfg.Wait)
	best, progress := -1, start
	for {
		lk, err := p.d.Watches.LookWatch(ctx, f.DLQ, pr.Watch)
		if err != nil || lk.Full {
			return false, false
		}
		if lk.Consumers > 0 {
			return false, true
		}
		left := pr.WatchReady + (lk.Arrived - pr.WatchArrived) - lk.Ready
		switch {
		case left < 0:
			return false, false
		case left == 0:
			return p.ackUnmoved(ctx, f), true
		}
		now := clock.Now()
		if best < 0 || left < best {
			best, progress = left, now
		}
		if now.Sub(progress) >= min(p.cfg.StatsLag, p.cfg.Wait) || now.Sub(start) >= most {
			p.cfg.Log.Info().Str("dlq", f.DLQ).Int("not_ready", left).
				Msg("approval: messages of the DLQ are gone or held since the preview; comparing")
			return false, true
		}
		select {
		case <-ctx.Done():
			return false, true
		case <-clock.After(p.cfg.Poll):
		}
	}
}

// ackUnmoved reports whether the latest management sample, however old,
// shows the DLQ's ack counter where the preview found it: an ack older
// than a statistics interval that the watch's sum missed (see above). No
// sample, or none at the preview, leaves the watch's verdict standing; a
// sample whose counters lapsed (Counters.Lapsed) does not.
func (p *Prover) ackUnmoved(ctx context.Context, f Preview) bool {
	pr := f.Proof
	if pr.SampledAt.IsZero() {
		return true
	}
	cs, err := p.d.Counters.Counters(ctx, f.DLQ)
	if err != nil || cs.SampledAt.IsZero() {
		return true
	}
	// A sample without its counters cannot show the ack unmoved.
	return !cs.Lapsed && cs.Ack == pr.Ack
}
