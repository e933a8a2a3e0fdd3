package replay

import (
	"context"

	"github.com/stroma/dlqbot/engine"
)

// targetProof is what a run knows of one target queue's management
// counters since an anchor sample: whether they can prove that every copy
// the run published there was delivered and acked (docs/design.md "How
// settling is judged"), which ends a step's settle before its grace.
//
// The anchor is a sample read before a step published, showing the target
// drained (nothing ready, nothing unacknowledged). From there on the run
// counts its own copies to the target (ours). A later sample proves them
// consumed when its deliver_get and ack counters each grew by exactly
// ours, its publish counter by no more than ours, and nothing was
// redelivered: as far as the broker counted, every message that entered
// the target since the anchor was one of the run's, each was delivered
// once and acked, and none is still held by a consumer that could reject
// it yet. A copy rejected before
// that is a return, found by the step's look for returns as always. Any
// counter that grew by more than ours (another publisher or reader on the
// target, a requeue, a copy whose fate the run does not know) makes the
// target unprovable until a new anchor: its steps then wait the grace. A
// sample whose counters lapsed (QueueCounters.Lapsed: left out, or below
// an earlier answer's) is never an anchor and proves nothing, nor does one
// below the anchor's (a reset).
type targetProof struct {
	anchor engine.QueueCounters
	ours   int64
	ok     bool
}

// noteBaseline is told of each target's counters read before a step
// publishes (sampleTargets). A target without a usable anchor takes this
// sample as its anchor when it shows the target drained and no step of
// this run that sent there is still unjudged.
func (jg *judge) noteBaseline(q string, c engine.QueueCounters) {
	if jg.proofs == nil {
		jg.proofs = map[string]*targetProof{}
	}
	if !jg.wantsAnchor(q) {
		return
	}
	if c.SampledAt.IsZero() || c.Lapsed || c.Ready != 0 || c.Unacked != 0 {
		jg.proofs[q] = &targetProof{}
		return
	}
	jg.proofs[q] = &targetProof{anchor: c, ok: true}
}

// wantsAnchor reports whether a sample of q read now could become its
// anchor: q has none in use, and no step of this run that sent there is
// still unjudged.
func (jg *judge) wantsAnchor(q string) bool {
	if p := jg.proofs[q]; p != nil && p.ok {
		return false
	}
	return jg.pending == nil || jg.pending.sentPer[q] == 0
}

// anchorSample reads q's counters before a step. When q wants an anchor
// and the sample's counters lapsed (the API left them out, or they fell
// below an earlier answer's: seen on RabbitMQ 4.3), it reads again every
// SettlePoll until the broker's next sample decides, for at most the
// grace, which is all an anchor could save the step.
func (jg *judge) anchorSample(ctx context.Context, q string) (engine.QueueCounters, error) {
	c, err := jg.counters(ctx, q)
	if err != nil || !c.Lapsed || c.Ready != 0 || c.Unacked != 0 || !jg.wantsAnchor(q) {
		return c, err
	}
	clock := jg.s.d.Clock
	deadline := clock.Now().Add(jg.s.cfg.SettleGrace)
	for c.Lapsed && clock.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return c, nil
		case <-clock.After(jg.s.cfg.SettlePoll):
		}
		next, err := jg.counters(ctx, q)
		if err != nil {
			return c, nil
		}
		c = next
	}
	return c, nil
}

// countSent adds a step's confirmed copies to its targets' proofs. A step
// that may have put copies on a target that it cannot count (a copy the
// broker refused or bounced, one in doubt, an original that could not be
// acked) leaves that target unprovable, as does a failed move.
func (jg *judge) countSent(sentPer map[string]int, mr engine.MoveResult, moveErr error) {
	unsure := map[string]bool{}
	for _, f := range mr.Failed {
		unsure[f.Target] = true
	}
	for _, m := range mr.Unacked {
		unsure[m.Target] = true
	}
	for q, p := range jg.proofs {
		switch {
		case moveErr != nil || unsure[q]:
			p.ok = false
		case p.ok:
			p.ours += int64(sentPer[q])
		}
	}
}

// proven reports whether q's counters, read now, prove every copy the run
// published to q delivered and acked (see targetProof). A counter past
// ours ends the proof for q.
func (jg *judge) proven(ctx context.Context, q string) bool {
	p := jg.proofs[q]
	if p == nil || !p.ok || p.ours == 0 {
		return false
	}
	c, err := jg.counters(ctx, q)
	if err != nil {
		jg.s.base.Warn(jg.id, jg.dlq, "read target counters", err)
		return false
	}
	if c.Lapsed {
		return false // counters that mean nothing: the next sample
	}
	a := p.anchor
	pub, got, acked := c.Publish-a.Publish, c.DeliverGet-a.DeliverGet, c.Ack-a.Ack
	if pub < 0 || got < 0 || acked < 0 || c.Redeliver < a.Redeliver {
		// Below the anchor, yet not lapsed: the broker confirmed a reset
		// since. It proves nothing, and never lets the counts match again.
		return false
	}
	if pub > p.ours || got > p.ours || acked > p.ours || c.Redeliver != a.Redeliver {
		p.ok = false // someone else's messages or a requeue
		jg.s.cfg.Log.Info().Str("replay_id", jg.id).Str("queue", q).Str("op", "prove settle").
			Int64("published", pub).Int64("delivered", got).Int64("acked", acked).Int64("copies", p.ours).
			Msg("the target's counters grew by more than the replay's copies: its steps wait the grace")
		return false
	}
	// The publish counter only guards against other publishers: the
	// broker can drop the last statistics of a channel that closes (the
	// mover's, after a step), so it may stay below ours for good.
	if got != p.ours || acked != p.ours {
		return false
	}
	// The counters are a sample, and its anchor may be one too: one that
	// lagged behind the target's own traffic before the replay (a sample
	// taken mid-way through other deliveries that showed it drained) lets
	// that traffic pass for the replay's copies. The instant count closes
	// it: copies all consumed leave nothing ready in a target no one else
	// publishes to, and the run publishes nothing while it judges. (Seen
	// under load: a step of 10 copies to a target without a consumer
	// "proven" settled.)
	st, err := jg.s.d.Broker.Inspect(ctx, q)
	if err != nil {
		jg.s.base.Warn(jg.id, jg.dlq, "inspect target", err)
		return false
	}
	return st.Exists && st.Ready == 0
}
