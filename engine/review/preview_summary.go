package review

import (
	"fmt"
	"github.com/stroma/dlqbot/engine"
)

// summarise counts the preview and lists what would go wrong, most serious
// first: targets whose consumers were not restarted since the messages
// failed, missing targets, messages without a target, targets without
// consumers, messages already replayed, parked messages, then warnings.
func (s *Service) summarise(p *engine.Preview, r *previewRows) {
	var noTarget, badTarget, replayed, parked, unreadable, refused int
	refusal := ""
	for i, row := range r.rows {
		n, c := int(row.count), r.classes[row.class]
		switch {
		case c.parked:
			parked += n
			continue
		case r.targetOf(i) == "":
			noTarget += n
			if c.badTarget {
				badTarget += n
			}
			continue
		}
		p.Selected += n
		p.Distinct++
		if c.again || row.replayed {
			replayed += n
		}
		if c.unreadable {
			unreadable += n
		}
		if c.refusal != "" {
			refused += n
			refusal = c.refusal
		}
	}
	p.Parked = parked
	// Consumers that failed these messages and still run come first: a
	// replay now would most likely fail them again.
	p.Problems = append(p.Problems, unchangedProblems(p.Targets)...)
	for _, t := range p.Targets {
		if !t.Exists {
			p.Problems = append(p.Problems, engine.Problem{Kind: engine.ProblemTargetMissing, Queue: t.Queue, Messages: t.Messages,
				Detail: fmt.Sprintf("target queue %s does not exist: its %d message(s) would stay in the DLQ", t.Queue, t.Messages)})
		}
	}
	if noTarget > 0 {
		detail := fmt.Sprintf("%d message(s) have no source queue that can be derived; they are left out — replay them with to=<queue>", noTarget)
		if badTarget > 0 {
			detail = fmt.Sprintf("%d message(s) have no valid target (%d name a queue in their headers that is not a valid queue name: white space, a control or an invisible character); they are left out, never replayed to it — replay them with to=<queue>", noTarget, badTarget)
		}
		p.Problems = append(p.Problems, engine.Problem{Kind: engine.ProblemNoTarget, Messages: noTarget, InvalidTargets: badTarget, Detail: detail})
	}
	for _, t := range p.Targets {
		if t.Exists && t.Consumers == 0 {
			p.Problems = append(p.Problems, engine.Problem{Kind: engine.ProblemNoConsumers, Queue: t.Queue, Messages: t.Messages,
				Detail: fmt.Sprintf("target queue %s has no consumers now: its %d message(s) would wait there unprocessed", t.Queue, t.Messages)})
		}
	}
	if refused > 0 {
		p.Problems = append(p.Problems, engine.Problem{Kind: engine.ProblemRetryState, Messages: refused,
			Detail: fmt.Sprintf("%d message(s) carry a marker that makes their consumer refuse a replayed copy before its handler runs; the replay resets it. For example: %s", refused, refusal)})
	}
	if replayed > 0 {
		p.Problems = append(p.Problems, engine.Problem{Kind: engine.ProblemAlreadyReplayed, Messages: replayed,
			Detail: fmt.Sprintf("%d message(s) were already replayed before and failed again", replayed)})
	}
	if parked > 0 {
		p.Problems = append(p.Problems, engine.Problem{Kind: engine.ProblemParked, Messages: parked,
			Detail: fmt.Sprintf("%d message(s) were replayed park_after times or more and are left out (include_parked=true to include them)", parked)})
	}
	p.Budget = s.budgetView(p.DLQ, p.Selected, engine.RereadsPerStep)
	if p.Budget != nil {
		p.Problems = append(p.Problems, engine.Problem{Kind: engine.ProblemDeliveryLimit, Queue: p.DLQ.Name, Messages: p.Scanned, Detail: budgetDetail(p.DLQ, p.Budget, p.Selected, engine.RereadsPerStep)})
	}
	if unreadable > 0 {
		p.Problems = append(p.Problems, engine.Problem{Kind: engine.ProblemUnreadable, Messages: unreadable,
			Detail: fmt.Sprintf("%d message(s) have headers that could not be fully read; they are shown with what could be", unreadable)})
	}
}
