package replay

import (
	"context"
	"errors"
	"fmt"

	"github.com/stroma/dlqbot/engine"
)

// errTripped stops a step's sends when copies of the replay came back
// while it sent beside the step before it, still unjudged (settle_breaker.go).
var errTripped = errors.New("copies of this replay came back to the DLQ while the next step was sending")

// mayOverlap reports whether step p, sent, may stay unjudged while the
// next step sends (docs/design.md "How settling is judged", "Overlapping steps"): only for an unpaced
// replay that finds returns through its tap, past the canary phase (the
// step before p already had the cap's size, so the first step at the cap
// is judged before the next sends), when p sent all it planned and the
// plan has more, unless Config.Tune.StrictSteps. Then at most one unjudged
// step is outstanding beside the one sending, and each is at most the
// cap: no more than twice the cap go out before a failure is seen.
func (jg *judge) mayOverlap(p *sentStep) bool {
	prm := jg.rn.r.Params
	if p.rejudge != nil {
		return false // an earlier run's step: judged before anything is sent
	}
	if jg.s.cfg.Tune.StrictSteps || prm.Rate > 0 || jg.rn.ret.mode != engine.ReturnsTap || jg.rn.rec.resending || jg.rn.rec.rs.left() > 0 {
		return false
	}
	if p.res.Step < 2 || jg.canary(p.res.Step-1) {
		return false // the canary phase: send, then settle
	}
	r := p.res
	return r.Sent > 0 && r.Sent == r.Planned && r.Failed == 0 && r.Missing == 0 && r.HeldElsewhere == 0 && jg.rn.plan.Remaining() > 0
}

// canary reports whether step k is in the canary phase: smaller than the
// cap (the doubling steps).
func (jg *judge) canary(k int) bool {
	prm := jg.rn.r.Params
	return engine.StepSize(prm.Step, prm.Cap, k) < prm.Cap
}

// keepOrClose decides, once p was judged, what becomes of also, the step
// sent beside it: it stays unjudged (rn.pending) when p passed, and is
// closed now when p stops the replay or the breaker cut also's sends
// (tripped) — what of it was seen delivered is added to the replay's
// settled count and p's observation says what it sent, so that the stop
// claims no more than was observed.
func (jg *judge) keepOrClose(p, also *sentStep, tripped bool) {
	r := p.res
	if !(r.Returned > 0 || r.Settled == 0 || r.HeldElsewhere > 0 || tripped) {
		jg.pending = also
		return
	}
	settled := 0
	for _, w := range also.watches {
		settled += w.delivered
	}
	also.res.Settled = settled
	jg.noteSettled(also)
	p.res.Observation += fmt.Sprintf("; step %d, begun meanwhile, sent %d of %d (%d of them seen leaving the target queue)",
		also.res.Step, also.res.Sent, also.res.Planned, settled)
}

// sendBudget is stepBudget before a step that sends; before a call of step
// that only judges the unjudged step there is no read to budget.
func (jg *judge) sendBudget(ctx context.Context) error {
	if jg.pending != nil && !jg.mayOverlap(jg.pending) {
		return nil
	}
	return jg.rn.stepBudget(ctx)
}
