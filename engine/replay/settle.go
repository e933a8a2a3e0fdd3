package replay

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
	"github.com/stroma/dlqbot/engine/review"
)

// targetWatch follows one target queue while a step settles.
//
// RabbitMQ never tells a publisher that its messages were consumed, so
// settling is inferred (see docs/design.md "How settling is judged"): the step's n
// copies sat behind the R−n others ready when the last was confirmed
// (FIFO). Two estimates, each of which can only be late, never early:
//
//   - From the ready count alone (instant, passive declare): new arrivals
//     only raise it, so at least R − ready messages left since the confirm,
//     and at least n − ready of them were the step's.
//   - From the management API's deliver_get counter: it grew by D − D1
//     since a baseline D1 taken from a sample at least one statistics
//     interval after the confirm (so every channel's deliveries before the
//     confirm are in it); D − D1 − (R − n) of the step's were delivered.
type targetWatch struct {
	queue     string
	confirmed time.Time // when the step's last copy was confirmed
	sent      int
	ready     int   // R: ready count right after the step's confirms
	minReady  int   // the lowest ready count seen since
	publish0  int64 // publish counter before the step (−1: unknown)
	deliver1  int64 // deliver_get in the first sample counting the step (−1: not yet)
	delivered int   // how many of the step's copies are known delivered
	// byCounters is set when deliver_get showed copies delivered that the
	// ready count had not.
	byCounters bool
	booked     int // of delivered, how many the replay's counts hold (noteSettled)
	// consumers is the target's consumer count right after the step's
	// sends (-1: unknown), consumersMoved whether a later look saw another,
	// and noAckBefore whether the list read before the sends showed only
	// consumers that auto-ack (settle_noack.go).
	consumers      int
	consumersMoved bool
	noAckBefore    bool
}

// sampleTargets reads the publish counters of the step's targets before it
// sends, so the first sample that counts its publishes can be recognised;
// each sample may also become its target's anchor (noteBaseline).
func (jg *judge) sampleTargets(ctx context.Context, targets map[string]bool) map[string]int64 {
	out := map[string]int64{}
	jg.apiMark = jg.apiDown.Load()
	jg.noAckAt = nil
	for q := range targets {
		out[q] = -1
		st, err := jg.anchorSample(ctx, q)
		jg.noAckListed(q, st, err == nil)
		if err == nil {
			if !st.Lapsed {
				out[q] = st.Publish
			}
			jg.noteBaseline(q, st)
		} else {
			// Unknown: the baseline then goes by the sample's time alone.
			jg.s.base.Warn(jg.id, jg.dlq, "read target counters", err)
		}
	}
	return out
}

// sentStep is a step whose copies went out, from the end of its sends
// until it is judged: what its settling has observed so far.
type sentStep struct {
	res      engine.StepResult
	start    time.Time // when the step began
	sentPer  map[string]int
	publish0 map[string]int64
	look     *returnsLook
	watches  []*targetWatch
	// before is the replay's returned count when the step began to settle
	// (from), and graceFrom when all its copies were first seen delivered.
	before    int
	from      time.Time
	graceFrom time.Time
	// proven is true once the targets' counters showed every copy
	// delivered and acked (settle_proof.go), taken once every copy was
	// seen taken by consumers that auto-ack (settle_noack.go).
	proven bool
	taken  bool
	// apiMark is the run's apiDown before the step sampled its targets
	// (settle_api.go).
	apiMark int64
	// rejudge is the record of a step an earlier run sent and did not
	// judge, and booked how many of its copies were seen leaving (and
	// counted settled) before these watches began (settle_unjudged.go).
	rejudge *engine.UnjudgedStep
	booked  int
	// rest is set on the judgement of the copies still unsettled once the
	// plan is exhausted (settleRest): no step of its own.
	rest bool
}

// beginSettle starts watching what res sent (sentPer: confirmed copies per
// target) right after its last confirm.
func (jg *judge) beginSettle(ctx context.Context, res engine.StepResult, sentPer map[string]int, publish0 map[string]int64, look *returnsLook) *sentStep {
	clock := jg.s.d.Clock
	p := &sentStep{res: res, start: clock.Now(), sentPer: sentPer, publish0: publish0, look: look, before: jg.rn.r.Returned, from: clock.Now(), apiMark: jg.apiMark}
	for q, n := range sentPer {
		w := &targetWatch{queue: q, sent: n, publish0: publish0[q], deliver1: -1, confirmed: clock.Now(), consumers: -1}
		if st, err := jg.s.d.Broker.Inspect(ctx, q); err == nil {
			w.ready, w.minReady = st.Ready, st.Ready
			if st.Exists {
				w.consumers = st.Consumers
			}
		} else {
			// Unknown (-1): no delivery is counted until a ready count is
			// read (any count read after the confirms bounds what left:
			// n − ready), and the counters' path, which needs R, proves
			// nothing for this step. Taking it as 0 would count every
			// copy delivered at the first look.
			jg.s.base.Warn(jg.id, jg.dlq, "inspect target", err)
			w.ready, w.minReady = -1, math.MaxInt
		}
		p.watches = append(p.watches, w)
	}
	return p
}

// settleSteps waits until every copy of step p was delivered from its
// target and then either the targets' counters proved every copy acked
// with no return seen (settle_proof.go) or a grace period passed with no
// return, or the step timeout passes, and fills p.res with what was
// observed. also, when set, is the step sent since p (settle_overlap.go): it is
// watched meanwhile, so that its own settling is under way when p is
// judged, and a return seen meanwhile counts against p, the step judged
// (a copy that comes back late counts against the next step judged, as it
// always has). It ends within a second of a pause, cancel, lost lease or
// shutdown, returning that cause as stop (the copies were sent; what
// became of them is left to the next step or a check); err is a failure to
// look for returns (a read refused by the read budget).
func (jg *judge) settleSteps(parent context.Context, p, also *sentStep) (stop, err error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	go jg.cancelOnStop(ctx, cancel)
	clock := jg.s.d.Clock
	deadline := p.from.Add(jg.rn.r.Params.Timeout)
	for {
		if stop := jg.rn.stopCause(parent); stop != nil {
			return stop, nil
		}
		now := clock.Now()
		delivered := jg.watchStep(ctx, p, now)
		if also != nil {
			jg.watchStep(ctx, also, now)
		}
		if err := jg.rn.ret.lookForReturns(ctx, p.look, now, false); err != nil {
			if stop := jg.rn.stopCause(parent); stop != nil {
				return stop, nil
			}
			return nil, err
		}
		jg.rn.own.yieldCursor(ctx)
		if delivered && !p.proven && !p.taken && jg.rn.r.Returned == p.before {
			if p.taken = jg.takenAcked(ctx, p); !p.taken {
				p.proven = jg.provenAll(ctx, p)
			}
		}
		early := (p.proven || p.taken) && jg.rn.r.Returned == p.before
		if (delivered && (early || now.Sub(p.graceFrom) >= jg.s.cfg.SettleGrace)) || !now.Before(deadline) {
			break
		}
		select {
		case <-ctx.Done():
		case <-clock.After(jg.s.cfg.SettlePoll):
		}
	}
	mode := jg.rn.ret.mode
	p.look.alone, p.look.before, p.look.canary = also == nil, p.before, jg.canary(p.res.Step)
	if err := jg.rn.ret.lookForReturns(ctx, p.look, clock.Now(), true); err != nil {
		if stop := jg.rn.stopCause(parent); stop != nil {
			return stop, nil
		}
		return nil, err
	}
	res := &p.res
	res.Settled = p.booked
	for _, w := range p.watches {
		res.Settled += w.delivered
	}
	res.Settled = min(res.Settled, res.Sent)
	res.Returned = jg.rn.r.Returned - p.before
	if jg.rn.r.Unseen != nil {
		u := *jg.rn.r.Unseen
		res.Unseen = &u
	}
	res.Observation = jg.describe(res, clock.Now().Sub(p.from))
	switch {
	case res.Returned > 0 || res.Settled < res.Sent:
	case p.taken:
		res.Observation += "; every consumer of the target takes messages with auto-ack, so every copy was acked as it was delivered"
	case p.proven:
		res.Observation += "; the target's counters show every copy delivered and acked"
	}
	jg.evidence(p)
	if mode != jg.rn.ret.mode {
		res.Observation += "; from now on returns are found by re-reading the DLQ: " + jg.rn.ret.modeNote
	}
	return nil, nil
}

// watchStep observes p's targets at now and reports whether all its copies
// are known delivered (noting when that was first seen).
func (jg *judge) watchStep(ctx context.Context, p *sentStep, now time.Time) bool {
	all := true
	for _, w := range p.watches {
		jg.observe(ctx, w)
		all = all && w.delivered == w.sent
	}
	if all && p.graceFrom.IsZero() {
		p.graceFrom = now
	}
	return all
}

// provenAll reports whether the counters of every target of p prove its
// copies delivered and acked.
func (jg *judge) provenAll(ctx context.Context, p *sentStep) bool {
	for _, w := range p.watches {
		if !jg.proven(ctx, w.queue) {
			return false
		}
	}
	return len(p.watches) > 0
}

// cancelOnStop cancels a settling step's context as soon as sending must
// stop (pause, cancel, lost lease), so a slow read or management call in
// progress cannot hold the step past the 1 s promise.
func (jg *judge) cancelOnStop(ctx context.Context, cancel context.CancelFunc) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-jg.s.d.Clock.After(50 * time.Millisecond):
			if jg.rn.controlErr() != nil || jg.rn.hb.lost.Load() {
				cancel()
				return
			}
		}
	}
}

// observe updates w from the queue's ready count and counters.
func (jg *judge) observe(ctx context.Context, w *targetWatch) {
	if w.delivered == w.sent {
		return
	}
	st, err := jg.s.d.Broker.Inspect(ctx, w.queue)
	switch {
	case err != nil:
		jg.s.base.Warn(jg.id, jg.dlq, "inspect target", err)
	case !st.Exists:
		// Deleted since the step sent to it: its copies went with it.
		jg.s.base.Warn(jg.id, jg.dlq, "inspect target", fmt.Errorf("%s: %w", w.queue, engine.ErrQueueNotFound))
	default:
		if st.Consumers != w.consumers {
			w.consumersMoved = true
		}
		w.minReady = min(w.minReady, st.Ready)
		if got := w.sent - w.minReady; got > w.delivered {
			w.delivered = min(got, w.sent)
		}
		if w.delivered == w.sent {
			return
		}
	}
	cs, err := jg.counters(ctx, w.queue)
	if err != nil {
		jg.s.base.Warn(jg.id, jg.dlq, "read target counters", err)
		return
	}
	if cs.Lapsed {
		return // counters that mean nothing: the next sample
	}
	if w.deliver1 < 0 {
		// The baseline must come from a sample taken after the confirm
		// (by its timestamp, else by its publish counter), or the
		// watermark would be early.
		fresh := !cs.SampledAt.IsZero() && cs.SampledAt.After(w.confirmed.Add(jg.s.cfg.Tune.StatsLag)) &&
			(w.publish0 < 0 || cs.Publish >= w.publish0+int64(w.sent))
		if fresh {
			w.deliver1 = cs.DeliverGet
		}
		return
	}
	if w.ready < 0 {
		return // R unknown: how many were ahead of the step cannot be told
	}
	ahead := int64(w.ready - w.sent)
	if ahead < 0 {
		ahead = 0
	}
	got := cs.DeliverGet - w.deliver1 - ahead
	if got > int64(w.sent) {
		got = int64(w.sent)
	}
	if int(got) > w.delivered {
		w.delivered, w.byCounters = int(got), true
	}
}

// isNew reports whether m is a failure that arrived since the replay
// started: not one of the previewed messages, and dead-lettered since.
func (jg *judge) isNew(m letter.Meta) bool {
	return !jg.rn.plan.Has(m.ID) && review.DiedSince(m, jg.rn.r.CreatedAt)
}

// describe words what a step showed, claiming no more than was observed.
func (jg *judge) describe(res *engine.StepResult, took time.Duration) string {
	t := took.Round(time.Second)
	var s string
	switch {
	case res.Settled == res.Sent:
		s = fmt.Sprintf("all %d settled", res.Sent)
	case res.Settled == 0:
		s = fmt.Sprintf("none of the %d settled within %s", res.Sent, t)
	default:
		s = fmt.Sprintf("%d of %d settled within %s", res.Settled, res.Sent, t)
	}
	switch {
	case res.Returned > 0:
		s += fmt.Sprintf("; %d came back to %s", res.Returned, jg.dlq)
	case res.Unseen == nil:
		s += "; none seen back in " + jg.dlq
	}
	if res.Unseen != nil {
		s += "; " + res.Unseen.Words()
	}
	return s
}
