package replay

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// unsettledCount is how many copies r sent were not yet seen leaving their
// target queue.
func unsettledCount(r engine.Replay) int {
	n := 0
	for _, c := range r.Unsettled {
		n += c
	}
	return n
}

// addUnsettled books the copies a step sent (per target) as not yet seen
// leaving their targets.
func (jg *judge) addUnsettled(sentPer map[string]int) {
	for q, n := range sentPer {
		if n <= 0 {
			continue
		}
		if jg.rn.r.Unsettled == nil {
			jg.rn.r.Unsettled = map[string]int{}
		}
		jg.rn.r.Unsettled[q] += n
	}
}

// opened notes step p, sent, as not judged yet.
func (jg *judge) opened(p *sentStep) {
	if p == nil || p.res.Sent == 0 {
		return
	}
	if jg.open == nil {
		jg.open = map[int]*sentStep{}
	}
	if _, ok := jg.open[p.res.Step]; !ok {
		jg.open[p.res.Step] = p
	}
}

// noteSettled books what p's watches saw leave the targets since the last
// booking: settled, no longer unsettled. p is then judged.
func (jg *judge) noteSettled(p *sentStep) int {
	n := 0
	for _, w := range p.watches {
		d := w.delivered - w.booked
		if d <= 0 {
			continue
		}
		w.booked = w.delivered
		n += d
		if left := jg.rn.r.Unsettled[w.queue] - d; left > 0 {
			jg.rn.r.Unsettled[w.queue] = left
		} else {
			delete(jg.rn.r.Unsettled, w.queue)
		}
	}
	jg.rn.r.Settled += n
	delete(jg.open, p.res.Step)
	return n
}

// keepUnjudged, when a run ends early, records its steps not judged yet in
// Replay.Unjudged for the next run. What they saw settle is not counted:
// a step claims nothing before it is judged (their copies stay unsettled,
// and the judgement that comes sees again those that left).
func (jg *judge) keepUnjudged() {
	if len(jg.open) == 0 {
		return
	}
	u := jg.rn.r.Unjudged
	for _, k := range slices.Sorted(maps.Keys(jg.open)) {
		p := jg.open[k]
		if p.rest {
			continue // what is still unsettled is judged at the next run's end
		}
		if p.rejudge != nil {
			u = p.rejudge // the judgement of an earlier run's step, ended again
			continue
		}
		before := jg.rn.r.Returned
		if !p.from.IsZero() {
			before = p.before
		}
		if u == nil {
			u = &engine.UnjudgedStep{Step: k, Returned: before}
		}
		u.Last = max(u.Last, k)
		u.Sent += p.res.Sent
		u.Returned = min(u.Returned, before)
	}
	if u != nil && u.Last == u.Step {
		u.Last = 0
	}
	jg.rn.r.Unjudged = u
	jg.open = nil
}

// watchUnsettled begins to settle every copy still unsettled, as one step
// numbered k that sent sent copies; returns beyond before are its.
func (jg *judge) watchUnsettled(ctx context.Context, k, sent, before int) *sentStep {
	per := maps.Clone(jg.rn.r.Unsettled)
	publish0 := map[string]int64{}
	for q := range per {
		publish0[q] = -1 // unknown: the watch goes by ready counts
	}
	res := engine.StepResult{Step: k, Planned: sent, Sent: sent}
	p := jg.beginSettle(ctx, res, per, publish0, jg.rn.ret.newLook(ctx, false))
	p.before = before
	// Copies of these steps no longer unsettled were seen leaving (and
	// counted) before.
	p.booked = max(0, sent-unsettledCount(jg.rn.r))
	return p
}

// rejudge makes the step the last run left unjudged (Replay.Unjudged) the
// first step this run judges: rn.pending, judged before anything is sent.
func (jg *judge) rejudge(ctx context.Context) {
	u := jg.rn.r.Unjudged
	if u == nil || (jg.pending != nil && jg.pending.rejudge != nil) {
		return
	}
	p := jg.watchUnsettled(ctx, u.Step, u.Sent, u.Returned)
	p.rejudge = u
	jg.pending = p
	jg.opened(p)
}

// judgedAgain words, for the line of a step judged by a later run than the
// one that sent it, that it was.
func judgedAgain(u *engine.UnjudgedStep, obs string) string {
	s := "judged when the replay resumed"
	if u.Last > u.Step {
		s += fmt.Sprintf(" (with %s, sent before it stopped)", u.Steps())
	}
	return s + ": " + obs
}

// settleRest, once the plan is exhausted, judges the copies still
// unsettled (a step that passed with some of its copies not yet seen
// leaving), so that the run ends on what became of every copy. stop is a
// pause, cancel or lost lease meanwhile; err a failure to look for
// returns. Its findings are in rn.rest.
func (jg *judge) settleRest(ctx context.Context) (stop, err error) {
	n := unsettledCount(jg.rn.r)
	if n == 0 || jg.rest != nil {
		return nil, nil
	}
	p := jg.watchUnsettled(ctx, jg.rn.r.Step, n, jg.rn.r.Returned)
	p.rest = true
	jg.opened(p)
	if !jg.consumed(ctx) {
		// Nothing takes them: one look at the targets, no wait.
		jg.watchStep(ctx, p, jg.s.d.Clock.Now())
		jg.noteSettled(p)
		return nil, nil
	}
	if stop, err := jg.settleSteps(ctx, p, nil); stop != nil || err != nil {
		return stop, err
	}
	jg.noteSettled(p)
	jg.rest = &p.res
	return nil, nil
}

// restNote words why a run whose plan is exhausted, and which sent every
// copy, does not finish: copies came back after their step was judged,
// or some were never seen leaving their targets ("" when neither).
func (jg *judge) restNote() string {
	var parts []string
	if jg.rest != nil && jg.rest.Returned > 0 {
		parts = append(parts, fmt.Sprintf("%d copy(ies) came back to %s after their step was judged", jg.rest.Returned, jg.dlq))
	}
	if u := unsettledNote(jg.rn.r); u != "" {
		parts = append(parts, u)
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("not finished: all %d sent, %d settled, %s; ", jg.rn.r.Sent, jg.rn.r.Settled, jg.rn.ret.cameBack()) + strings.Join(parts, "; ")
}

// unsettledNote words the copies sent and never seen leaving their target
// queue ("" when none): whether they were consumed cannot be told.
func unsettledNote(r engine.Replay) string {
	n := unsettledCount(r)
	if n == 0 {
		return ""
	}
	qs := slices.Sorted(maps.Keys(r.Unsettled))
	return fmt.Sprintf("%d copy(ies) not seen leaving %s (whether they were consumed cannot be told yet; a resume judges them again, a check shows what came back)", n, strings.Join(qs, ", "))
}

// windDown, after a cancel, goes on watching the copies already sent for
// their step's grace (until each was seen leaving its target and the grace
// passed with no return, or the step timeout), so that the cancelled
// record counts what came back as a check would. Copies on targets with no
// consumer are not waited for: nothing takes them, so none comes back
// while the run could watch. It reports whether it watched anything.
func (jg *judge) windDown(parent context.Context) bool {
	n := unsettledCount(jg.rn.r)
	u := jg.rn.r.Unjudged
	if (n == 0 && u == nil) || jg.rn.hb.lost.Load() || parent.Err() != nil {
		return false
	}
	if n > 0 && !jg.consumed(parent) {
		return false
	}
	sent, before := n, jg.rn.r.Returned
	if u != nil {
		sent, before = u.Sent, u.Returned
	}
	ctx, cancel := context.WithTimeout(parent, jg.rn.r.Params.WithDefaults().Timeout+5*time.Second)
	defer cancel()
	jg.winding.Store(true)
	defer jg.winding.Store(false)
	p := jg.watchUnsettled(ctx, jg.rn.r.Step, sent, before)
	if _, err := jg.settleSteps(ctx, p, nil); err != nil {
		jg.s.base.Warn(jg.id, jg.dlq, "watch the copies sent before the cancel", err)
	}
	jg.noteSettled(p)
	jg.rn.r.Unjudged = nil
	return true
}

// cancelledText words a cancelled replay's counts after windDown.
func (jg *judge) cancelledText() string {
	s := fmt.Sprintf("cancelled: %d sent (%d seen leaving the target queue, %s), %d left in %s untouched",
		jg.rn.r.Sent, jg.rn.r.Settled, jg.rn.ret.cameBack(), jg.rn.plan.Remaining(), jg.dlq)
	if u := unsettledCount(jg.rn.r); u > 0 {
		s += fmt.Sprintf("; %d copy(ies) not seen leaving the target queue within the step's grace (a check shows what comes back)", u)
	}
	return s
}

// consumed reports whether a target holding unsettled copies has a
// consumer (or cannot be inspected): only then can they leave it, or come
// back, while the run watches.
func (jg *judge) consumed(ctx context.Context) bool {
	for q := range jg.rn.r.Unsettled {
		st, err := jg.s.d.Broker.Inspect(ctx, q)
		if err != nil || st.Consumers > 0 {
			return true
		}
	}
	return false
}
