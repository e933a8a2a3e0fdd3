package review

import (
	"context"
	"errors"
	"fmt"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
	"sort"
	"time"
)

// historyBatch is how many ids a preview asks the ledger about at once.
const historyBatch = 20000

// resolveTargets sets each class's target: to=, else its source, else the
// one queue its original exchange routes it to; then the listed messages'.
func (s *Service) resolveTargets(ctx context.Context, sel engine.Selection, p *engine.Preview, r *previewRows) error {
	routes := map[string][]string{}
	r.target, r.note = make([]string, len(r.classes)), make([]string, len(r.classes))
	for ci, c := range r.classes {
		switch {
		case sel.To != "":
			r.target[ci] = sel.To
		case c.source != "":
			r.target[ci] = c.source
		case c.needsRoute && c.routingKey != "":
			key := c.exchange + "\x00" + c.routingKey
			qs, ok := routes[key]
			if !ok {
				var err error
				qs, err = s.d.Broker.Route(ctx, c.exchange, c.routingKey)
				if err != nil && !errors.Is(err, engine.ErrQueueNotFound) {
					if errors.Is(err, engine.ErrBrokerUnavailable) {
						return fmt.Errorf("engine: preview: route %s: %w", c.exchange, err)
					}
					r.note[ci] = fmt.Sprintf("exchange %q cannot be resolved: %v", c.exchange, err)
				}
				routes[key] = qs
			}
			switch len(qs) {
			case 1:
				r.target[ci] = qs[0]
			case 0:
				r.note[ci] = fmt.Sprintf("exchange %q routes %q to no queue; replay it with to=<queue>", c.exchange, c.routingKey)
			default:
				r.note[ci] = fmt.Sprintf("exchange %q routes %q to %d queues; replay it with to=<queue>", c.exchange, c.routingKey, len(qs))
			}
		}
	}
	for i := range p.Messages {
		c := r.rows[i].class
		p.Messages[i].Target = r.target[c]
		if r.note[c] != "" {
			p.Messages[i].SourceNote = r.note[c]
		}
	}
	return nil
}

// addHistory marks the rows a replay already sent, asking the ledger in
// batches, and lists the sends on the listed messages.
func (s *Service) addHistory(ctx context.Context, p *engine.Preview, r *previewRows) error {
	for start := 0; start < len(r.rows); start += historyBatch {
		end := min(start+historyBatch, len(r.rows))
		ids := make([]string, 0, end-start)
		for i := start; i < end; i++ {
			ids = append(ids, r.id(i))
		}
		hist, err := s.d.Ledger.History(ctx, p.DLQ.Name, ids)
		if err != nil {
			return fmt.Errorf("engine: preview: replay history: %w", err)
		}
		if len(hist) == 0 {
			continue
		}
		for i := start; i < end; i++ {
			sent := hist[ids[i-start]]
			if len(sent) == 0 {
				continue
			}
			r.rows[i].replayed = true
			if i < len(p.Messages) {
				p.Messages[i].Replayed = sent
			}
		}
	}
	return nil
}

// inspectTargets counts the selected copies per target, by reason, and
// looks at each target queue.
func (s *Service) inspectTargets(ctx context.Context, p *engine.Preview, r *previewRows) error {
	byQueue := map[string]*engine.TargetView{}
	for i, row := range r.rows {
		q := r.targetOf(i)
		if q == "" {
			continue
		}
		t := byQueue[q]
		if t == nil {
			t = &engine.TargetView{Queue: q, Reasons: map[letter.Reason]int{}, MixedScripts: engine.MixedScripts(q) != ""}
			byQueue[q] = t
		}
		t.Messages += int(row.count)
		t.Reasons[r.classes[row.class].reason] += int(row.count)
	}
	for ci, c := range r.classes {
		if t := byQueue[r.target[ci]]; t != nil && !c.parked && r.lastDeath[ci].After(t.LastFailure) {
			t.LastFailure = r.lastDeath[ci]
		}
	}
	for q, t := range byQueue {
		st, err := s.d.Broker.Inspect(ctx, q)
		if err != nil {
			return fmt.Errorf("engine: preview: inspect target %s: %w", q, err)
		}
		t.Exists, t.Consumers = st.Exists, st.Consumers
		s.consumersSince(ctx, t)
		p.Targets = append(p.Targets, *t)
	}
	sort.Slice(p.Targets, func(i, j int) bool { return p.Targets[i].Queue < p.Targets[j].Queue })
	return nil
}

// consumersSince judges whether t's consumers were restarted since its
// messages' latest failure (TargetView.ConsumersSinceFailure), from the
// connections the management API lists for them. The API is a hint: when
// it is down, slow or lagging the verdict is SinceUnknown, and the
// preview goes on.
func (s *Service) consumersSince(ctx context.Context, t *engine.TargetView) {
	switch {
	case !t.Exists || t.Consumers == 0:
		t.ConsumersSinceFailure = engine.SinceNone
		return
	case t.LastFailure.IsZero():
		t.ConsumersSinceFailure = engine.SinceUnknown
		return
	}
	conns, err := s.d.Consumers.QueueConsumers(ctx, t.Queue)
	if err != nil {
		t.ConsumersSinceFailure = engine.SinceUnknown
		return
	}
	t.ConsumerConns = conns
	t.ConsumersSinceFailure = engine.SinceVerdict(conns, t.Consumers, t.LastFailure)
}

// unchangedProblems are the problems of targets whose consumers were all
// connected before their messages failed.
func unchangedProblems(targets []engine.TargetView) []engine.Problem {
	var out []engine.Problem
	for _, t := range targets {
		if t.ConsumersSinceFailure != engine.SinceUnchanged {
			continue
		}
		n := len(t.ConsumerConns)
		who := fmt.Sprintf("its %d consumers have", n)
		if n == 1 {
			who = "its consumer has"
		}
		out = append(out, engine.Problem{Kind: engine.ProblemConsumersUnchanged, Queue: t.Queue, Messages: t.Messages,
			Detail: fmt.Sprintf("%s: %s been connected since before these messages failed (the latest at %s) — is the fix deployed?",
				t.Queue, who, t.LastFailure.UTC().Format(time.RFC3339))})
	}
	return out
}
