package replay

import (
	"context"

	"github.com/stroma/dlqbot/engine"
)

// A step's copies that left a target whose every consumer takes messages
// without acknowledgements (auto-ack) were acked as they were delivered:
// the broker counts such a delivery acked, and no consumer can reject it
// or give it back. The step's judgement then needs no grace and no
// statistics sample (docs/design.md "How settling is judged"): once the
// target's ready count is 0 every copy was delivered, hence acked, and
// the step ends as soon as the look for returns has seen what arrived.
//
// Which consumers there are comes from two sources that fail in
// opposite directions: the passive declare's consumer count is live; the
// management API's consumer list drops a consumer that goes at once but
// adds a new one only at its next statistics sample. The rule holds a
// target taken-and-acked when
//
//   - the list read before the step sent showed at least one consumer and
//     every one of them auto-ack (noAckListed);
//   - the consumer count stayed the same from right after the sends to the
//     judgement, at every look (targetWatch.consumers, consumersMoved);
//   - at the judgement, between two passive declares that each show the
//     target's ready count 0 and that count of consumers, the list holds
//     exactly that many, every one auto-ack, and the last sample shows no
//     message unacknowledged.
//
// A consumer that acks and that subscribed since the last sample makes
// the list shorter than the count, and one that was listed shows it acks;
// either way the step waits for the counters' proof or the grace, as
// every step did. Blind spots: a consumer that subscribes while the step
// sends, acks, and cancels (basic.cancel, keeping its channel and the
// copies it holds) before the sends end; and a client reading the target
// with basic.get beside its consumers. A copy either of them rejects
// after the judgement is counted by the next step's look or the checks,
// as any return later than the grace always was, and so is the failure a
// consumer that auto-acks publishes to the DLQ itself after the step.

// noAckListed notes, from q's counters read before a step sends, whether
// the management API listed at least one consumer of q and every one of
// them auto-ack (noAckBefore).
func (jg *judge) noAckListed(q string, c engine.QueueCounters, ok bool) {
	if jg.noAckAt == nil {
		jg.noAckAt = map[string]bool{}
	}
	jg.noAckAt[q] = ok && c.Listed > 0 && c.NoAck == c.Listed
}

// noAckBefore hands the listing read before step p sent to p's watches;
// it serves that step only.
func (jg *judge) noAckBefore(p *sentStep) {
	for _, w := range p.watches {
		w.noAckBefore = jg.noAckAt[w.queue]
	}
	jg.noAckAt = nil
}

// takenAcked reports whether every target of p shows its copies taken by
// consumers that auto-ack (see above). A target whose consumers ack is not
// asked again for this step.
func (jg *judge) takenAcked(ctx context.Context, p *sentStep) bool {
	if len(p.watches) == 0 {
		return false
	}
	for _, w := range p.watches {
		if !jg.targetTakenAcked(ctx, w) {
			return false
		}
	}
	return true
}

// targetTakenAcked is takenAcked for one target.
func (jg *judge) targetTakenAcked(ctx context.Context, w *targetWatch) bool {
	if !w.noAckBefore || w.consumers < 1 || w.consumersMoved {
		return false
	}
	b := jg.s.d.Broker
	before, err := b.Inspect(ctx, w.queue)
	if err != nil || !before.Exists || before.Ready != 0 {
		return false
	}
	if before.Consumers != w.consumers {
		w.consumersMoved = true // a consumer came or went: not for this step
		return false
	}
	c, err := jg.counters(ctx, w.queue)
	if err != nil {
		jg.s.base.Warn(jg.id, jg.dlq, "read target consumers", err)
		return false
	}
	if c.NoAck < c.Listed {
		w.noAckBefore = false // a consumer that acks: the grace or the proof
		return false
	}
	if c.Listed != before.Consumers || c.Unacked != 0 {
		return false
	}
	after, err := b.Inspect(ctx, w.queue)
	return err == nil && after.Exists && after.Ready == 0 && after.Consumers == before.Consumers
}
