package replay

import (
	"context"
	"fmt"
	"github.com/stroma/dlqbot/engine"
	"maps"
	"slices"
	"strings"
	"time"
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
func (rn *run) addUnsettled(sentPer map[string]int) {
	for q, n := range sentPer {
		if n <= 0 {
			continue
		}
		if rn.r.Unsettled == nil {
			rn.r.Unsettled = map[string]int{}
		}
		rn.r.Unsettled[q] += n
	}
}

// opened notes step p, sent, as not judged yet.
func (rn *run) opened(p *sentStep) {
	if p == nil || p.res.Sent == 0 {
		return
	}
	if rn.open == nil {
		rn.open = map[int]*sentStep{}
	}
	if _, ok := rn.open[p.res.Step]; !ok {
		rn.open[p.res.Step] = p
	}
}

// noteSettled books what p's watches saw leave the targets since the last
// booking: settled, no longer unsettled. p is then judged.
func (rn *run) noteSettled(p *sentStep) int {
	n := 0
	for _, w := range p.watches {
		d := w.delivered - w.booked
		if d <= 0 {
			continue
		}
		w.booked = w.delivered
		n += d
		if left := rn.r.Unsettled[w.queue] - d; left > 0 {
			rn.r.Unsettled[w.queue] = left
		} else {
			delete(rn.r.Unsettled, w.queue)
		}
	}
	rn.r.Settled += n
	delete(rn.open, p.res.Step)
	return n
}

// keepUnjudged, when a run ends early, records its steps not judged yet in
// Replay.Unjudged for the next run. What they saw settle is not counted:
// a step claims nothing before it is judged (their copies stay unsettled,
// and the judgement that comes sees again those that left).
func (rn *run) keepUnjudged() {
	if len(rn.open) == 0 {
		return
	}
	u := rn.r.Unjudged
	for _, k := range slices.Sorted(maps.Keys(rn.open)) {
		p := rn.open[k]
		if p.rest {
			continue // what is still unsettled is judged at the next run's end
		}
		if p.rejudge != nil {
			u = p.rejudge // the judgement of an earlier run's step, ended again
			continue
		}
		before := rn.r.Returned
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
	rn.r.Unjudged = u
	rn.open = nil
}

// watchUnsettled begins to settle every copy still unsettled, as one step
// numbered k that sent sent copies; returns beyond before are its.
func (rn *run) watchUnsettled(ctx context.Context, k, sent, before int) *sentStep {
	per := maps.Clone(rn.r.Unsettled)
	publish0 := map[string]int64{}
	for q := range per {
		publish0[q] = -1 // unknown: the watch goes by ready counts
	}
	res := engine.StepResult{Step: k, Planned: sent, Sent: sent}
	p := rn.beginSettle(ctx, res, per, publish0, rn.newLook(ctx, false))
	p.before = before
	// Copies of these steps no longer unsettled were seen leaving (and
	// counted) before.
	p.booked = max(0, sent-unsettledCount(rn.r))
	return p
}

// rejudge makes the step the last run left unjudged (Replay.Unjudged) the
// first step this run judges: rn.pending, judged before anything is sent.
func (rn *run) rejudge(ctx context.Context) {
	u := rn.r.Unjudged
	if u == nil || (rn.pending != nil && rn.pending.rejudge != nil) {
		return
	}
	p := rn.watchUnsettled(ctx, u.Step, u.Sent, u.Returned)
	p.rejudge = u
	rn.pending = p
	rn.opened(p)
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
func (rn *run) settleRest(ctx context.Context) (stop, err error) {
	n := unsettledCount(rn.r)
	if n == 0 || rn.rest != nil {
		return nil, nil
	}
	p := rn.watchUnsettled(ctx, rn.r.Step, n, rn.r.Returned)
	p.rest = true
	rn.opened(p)
	if !rn.consumed(ctx) {
		// Nothing takes them: one look at the targets, no wait.
		rn.watchStep(ctx, p, rn.s.d.Clock.Now())
		rn.noteSettled(p)
		return nil, nil
	}
	if stop, err := rn.settleSteps(ctx, p, nil); stop != nil || err != nil {
		return stop, err
	}
	rn.noteSettled(p)
	rn.rest = &p.res
	return nil, nil
}

// restNote words why a run whose plan is exhausted, and which sent every
// copy, does not finish: copies came back after their step was judged,
// or some were never seen leaving their targets ("" when neither).
func (rn *run) restNote() string {
	var parts []string
	if rn.rest != nil && rn.rest.Returned > 0 {
		parts = append(parts, fmt.Sprintf("%d copy(ies) came back to %s after their step was judged", rn.rest.Returned, rn.r.DLQ))
	}
	if u := unsettledNote(rn.r); u != "" {
		parts = append(parts, u)
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("not finished: all %d sent, %d settled, %s; ", rn.r.Sent, rn.r.Settled, rn.cameBack()) + strings.Join(parts, "; ")
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
func (rn *run) windDown(parent context.Context) bool {
	n := unsettledCount(rn.r)
	u := rn.r.Unjudged
	if (n == 0 && u == nil) || rn.hb.lost.Load() || parent.Err() != nil {
		return false
	}
	if n > 0 && !rn.consumed(parent) {
		return false
	}
	sent, before := n, rn.r.Returned
	if u != nil {
		sent, before = u.Sent, u.Returned
	}
	ctx, cancel := context.WithTimeout(parent, rn.r.Params.WithDefaults().Timeout+5*time.Second)
	defer cancel()
	rn.winding.Store(true)
	defer rn.winding.Store(false)
	p := rn.watchUnsettled(ctx, rn.r.Step, sent, before)
	if _, err := rn.settleSteps(ctx, p, nil); err != nil {
		rn.Warn("watch the copies sent before the cancel", err)
	}
	rn.noteSettled(p)
	rn.r.Unjudged = nil
	return true
}

// cancelledText words a cancelled replay's counts after windDown.
func (rn *run) cancelledText() string {
	s := fmt.Sprintf("cancelled: %d sent (%d seen leaving the target queue, %s), %d left in %s untouched",
		rn.r.Sent, rn.r.Settled, rn.cameBack(), rn.plan.Remaining(), rn.r.DLQ)
	if u := unsettledCount(rn.r); u > 0 {
		s += fmt.Sprintf("; %d copy(ies) not seen leaving the target queue within the step's grace (a check shows what comes back)", u)
	}
	return s
}

// consumed reports whether a target holding unsettled copies has a
// consumer (or cannot be inspected): only then can they leave it, or come
// back, while the run watches.
func (rn *run) consumed(ctx context.Context) bool {
	for q := range rn.r.Unsettled {
		st, err := rn.s.d.Broker.Inspect(ctx, q)
		if err != nil || st.Consumers > 0 {
			return true
		}
	}
	return false
}
