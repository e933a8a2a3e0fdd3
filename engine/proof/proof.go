package proof

import (
	"context"
	"github.com/stroma/dlqbot/engine"
	"time"
)

// Approval without a read. A compare reads the whole DLQ again
// (234 s at 1,000,000 messages). It is needed only when something may
// have left the DLQ since the preview, and the broker's own counts can
// prove that nothing did:
//
//   - a message leaves a queue by an ack (a consumer's, a basic.get's, a
//     replay's: the management ack counter grows), or by being dropped
//     (a purge, a TTL, a length limit: the ready count falls);
//   - the preview froze, before its read, the DLQ's exact ready count (a
//     passive declare) and a management sample with no consumer and no
//     unacknowledged message, and its read saw the whole DLQ;
//   - at approval, a management sample that has caught up with the
//     preview and the approval — taken Config.StatsLag after the later
//     of the two began, nothing
//     unacknowledged, no consumer, the ready count a passive declare gives
//     — shows the same ready count and the same ack count, and a passive
//     declare right after it shows no consumer and the same ready count.
//
// The management statistics lag behind the queue, on a loaded broker by
// more than a statistics interval (4.3 gave samples dated after the
// preview that still counted its read unacknowledged): a sample that has
// not caught up proves nothing either way, so the approval waits for one
// (see Prove) rather than compare for a lag alone. What settles
// the question at once is an ack count that moved (a message left, or
// the counters were reset) or a caught-up sample whose ready count is not
// the preview's.
//
// Then no previewed message left: none was acked (the ack count), and a
// drop would show in the ready count (a message dead-lettered into the
// DLQ raises it) unless a message arrived to replace it in the same
// moment. That needs a DLQ that drops (a TTL, a length limit, a purge)
// and an arrival at once: the one blind spot, where the replay's own
// accounting still reports the dropped message missing, never sent. (The
// publish counter cannot close it: it lags the ready count by seconds
// after a burst of dead letters, so it would fail most proofs.) The proof
// fails — and approval falls back to the compare — on a counter that
// moved or went backwards (a reset: a broker restart) or a preview that
// did not see the whole DLQ at once, and on a missing sample or a
// consumer on the DLQ once the wait is over. What
// other dlqbot replays sent is decided from the ledger and the claims
// either way (cheap Redis reads), and the targets are inspected either
// way, so the approver still sees every change before anything is sent.
// The statistics' lag is the proof's second blind spot: an ack a loaded
// broker has not counted yet StatsLag after the approval began (a quorum
// DLQ drained and refilled just before Approve, on 4.3 under load) shows
// as nothing. So the statistics' proof is tried only where a compare
// costs more than its wait (a DLQ of Config.From messages or more), and
// the watch (watch.go) from WatchFrom; smaller DLQs are compared.
// The proof covers the DLQ up to the management sample's time, which is
// newer than the preview: like a compare, it is a snapshot, and the
// replay's own accounting (the engine's) stays the judge of what is
// missing.

// DefaultFrom is the default of Config.From (the engine's Config.Tune.ProofFrom): the
// fewest messages a DLQ holds for its approval to wait for the statistics'
// proof. The proof waits until a management sample StatsLag newer than the
// approval's start (six to eleven seconds); a compare reads 10,000 to
// 20,000 messages a second on two cores, so below 100,000 the compare is
// the quicker way, and it has neither of the proof's blind spots.
const DefaultFrom = 100000

// WatchFrom is the fewest messages a DLQ holds for its preview to open a
// watch (or Config.From, when that is fewer): the watch proves at once,
// where a compare of 20,000 takes a second or two.
const WatchFrom = 20000

// Proof is what a preview freezes for its approval's proof: the engine's
// ApprovalProof, which every token carries.
type Proof = engine.ApprovalProof

// Prover proves, at an approval, that no previewed message left the DLQ
// since the preview, without reading it: Begin before the preview's read,
// Keep after it (the Proof goes into the preview's token), Prove at the
// approval, and Close once the Proof has done its work.
type Prover struct {
	cfg Config
	d   Deps
}

// watchFrom is the fewest messages a DLQ holds for a watch: WatchFrom,
// or Config.From when that is fewer.
func (p *Prover) watchFrom() int { return min(p.cfg.From, WatchFrom) }

// New returns a Prover looking through d, tuned by cfg.
func New(cfg Config, d Deps) *Prover {
	return &Prover{cfg: cfg, d: d}
}

// Begin samples, before a preview's read, what a proof needs: the
// management counters and, for a DLQ large enough to be proven, a watch;
// nil when it can do neither (a consumer on the DLQ, no statistics and no
// watch).
func (p *Prover) Begin(ctx context.Context, dlq Queue) *Proof {
	if dlq.Consumers > 0 {
		return nil
	}
	pr := &Proof{Ready: dlq.Ready}
	cs, err := p.d.Counters.Counters(ctx, dlq.Name)
	if err == nil && !cs.SampledAt.IsZero() && !cs.Lapsed && cs.Consumers == 0 && cs.Unacked == 0 {
		pr.Ack, pr.SampledAt = cs.Ack, cs.SampledAt
	}
	if dlq.Ready >= p.watchFrom() {
		p.openWatch(ctx, dlq.Name, pr)
	}
	if pr.SampledAt.IsZero() && pr.Watch == "" {
		return nil
	}
	return pr
}

// Keep keeps pr only when the preview's read saw the whole DLQ
// (nothing held by others, no other consumer, not cut short), with how
// long the read took; a proof it drops closes its watch.
func (p *Prover) Keep(ctx context.Context, pr *Proof, info Read) *Proof {
	if pr == nil {
		return nil
	}
	if !info.Whole || info.Ready != pr.Ready {
		p.Close(ctx, pr)
		return nil
	}
	pr.Read = info.Duration
	return pr
}

// Prove reports whether the broker proves that no message left
// f's DLQ since its preview (see above), without reading the DLQ. It
// waits, polling every Config.Poll on the Clock, for a management
// sample that has caught up with the preview, for as long as the
// fallback would take (twice the preview's read, at least three StatsLags,
// at most Config.Wait): an approval a few seconds after its preview
// waits that long, a later one not at all. Any doubt left then is false
// (compare).
func (p *Prover) Prove(ctx context.Context, f Preview) bool {
	pr := f.Proof
	if pr == nil || pr.Ready < p.watchFrom() {
		return false
	}
	if unchanged, decided := p.proveByWatch(ctx, f); decided {
		return unchanged
	}
	if pr.Ready < p.cfg.From || pr.SampledAt.IsZero() {
		return false
	}
	clock := p.d.Clock
	start := clock.Now()
	wait := min(max(3*p.cfg.StatsLag, 2*pr.Read), p.cfg.Wait)
	for {
		unchanged, settled := p.proofLook(ctx, f, start)
		if settled {
			return unchanged
		}
		if clock.Now().Sub(start) >= wait {
			p.cfg.Log.Info().Str("dlq", f.DLQ).Dur("waited", clock.Now().Sub(start)).
				Msg("approval: the DLQ's management statistics did not catch up with the preview; comparing instead")
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-clock.After(p.cfg.Poll):
		}
	}
}

// proofLook is one look at f's DLQ for its proof. settled is false when
// the broker's views do not agree yet (a lag: wait and look again);
// otherwise unchanged is the proof's verdict.
//
// The sample must have caught up with the approval too (begun at start):
// its counters lag its time by up to StatsLag, so only a sample taken
// StatsLag after the later of the preview and the approval's start counts
// every ack before the approval (a previewed message consumed and another
// published in its place a moment before Approve keeps the ready count;
// only the ack counter shows it).
func (p *Prover) proofLook(ctx context.Context, f Preview, start time.Time) (unchanged, settled bool) {
	pr := f.Proof
	st, err := p.d.Broker.Inspect(ctx, f.DLQ)
	if err != nil || !st.Exists {
		return false, true
	}
	cs, err := p.d.Counters.Counters(ctx, f.DLQ)
	if err != nil {
		return false, true
	}
	if cs.SampledAt.IsZero() || cs.Lapsed {
		return false, false // the broker's next sample decides
	}
	if cs.Ack != pr.Ack {
		// Something acked a message of the DLQ since (the counter never
		// shows an ack that did not happen), or the counters were reset.
		return false, true
	}
	// The counters lag behind the sample's time by up to StatsLag; a
	// sample still counting a read's deliveries (the preview's, landing
	// back on a quorum DLQ) or a consumer has not caught up either.
	since := f.CreatedAt
	if start.After(since) {
		since = start
	}
	caughtUp := cs.SampledAt.After(since.Add(p.cfg.StatsLag)) && cs.Unacked == 0 &&
		cs.Consumers == 0 && st.Consumers == 0 && cs.Ready == st.Ready
	if !caughtUp {
		return false, false
	}
	if st.Ready != pr.Ready {
		return false, true
	}
	// The instant count again: nothing left while the sample was read.
	st, err = p.d.Broker.Inspect(ctx, f.DLQ)
	return err == nil && st.Exists && st.Consumers == 0 && st.Ready == pr.Ready, true
}
