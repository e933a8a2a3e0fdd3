package review

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
)

// Preview scans sel.DLQ without changing it, works out what a replay would
// do and, when anything is replayable, freezes it under a new token.
func (s *Service) Preview(ctx context.Context, sel engine.Selection, requester string) (*engine.Preview, error) {
	if sel.Vhost != "" && sel.Vhost != s.cfg.Vhost {
		return nil, fmt.Errorf("engine: preview %s: %w: this bot works in vhost %q, not %q (run one per vhost)", sel.DLQ, engine.ErrUnsupported, s.cfg.Vhost, sel.Vhost)
	}
	dlq, err := s.d.Broker.Inspect(ctx, sel.DLQ)
	if err != nil {
		return nil, fmt.Errorf("engine: preview %s: %w", sel.DLQ, err)
	}
	if !dlq.Exists {
		return nil, fmt.Errorf("engine: preview %s: %w", sel.DLQ, engine.ErrQueueNotFound)
	}
	p := &engine.Preview{DLQ: dlq, Selection: sel.String(), Requester: requester, Problems: []engine.Problem{}}
	proof := s.prover.Begin(ctx, proofQueue(dlq)) // before the read: see package proof
	defer func() {
		if p.Token == "" {
			s.prover.Close(ctx, proof) // no token will be approved by it
		}
	}()
	rows := newPreviewRows()
	arr := engine.NewArrivals(s.d.Clock.Now())
	red := newRedactor(s.d.Redactor, sel.DLQ)
	began := s.d.Clock.Now()
	info, err := s.previewScan(ctx, sel, requester, p, rows, arr, red)
	if err != nil {
		return nil, err
	}
	p.Arrivals = arr.View()
	red.arrivals(p.Arrivals)
	p.Coverage = info.Coverage
	p.HeldByReplay = s.heldByReplays(ctx, sel.DLQ, began, info.Coverage)
	p.Proof = s.prover.Keep(ctx, proof, proofRead(info))
	if err := s.previewBudget(ctx, p); err != nil {
		return nil, err
	}
	if err := s.resolveTargets(ctx, sel, p, rows); err != nil {
		return nil, err
	}
	if err := s.addHistory(ctx, p, rows); err != nil {
		return nil, err
	}
	if err := s.inspectTargets(ctx, p, rows); err != nil {
		return nil, err
	}
	s.summarise(p, rows)
	if p.Selected > 0 {
		s.canary(p, rows)
	}
	if pr, ok := partialRead(p); ok {
		p.Problems = append([]engine.Problem{pr}, p.Problems...)
	}
	if p.Selected > 0 {
		s.previewReturns(ctx, p)
	}
	if p.Selected > 0 {
		if err := s.freeze(ctx, sel, p, rows); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// previewScan reads the whole of sel.DLQ for p: it counts and lists the
// matching messages (redacted by red) into p and rows, and the selected
// ones' arrivals into arr, and returns what the read saw.
func (s *Service) previewScan(ctx context.Context, sel engine.Selection, requester string, p *engine.Preview, rows *previewRows, arr *engine.ArrivalHistogram, red *redactor) (engine.ScanInfo, error) {
	selected := 0
	info, err := s.scanWhole(ctx, sel.DLQ, "a preview of "+requester, func(m letter.Message) error {
		p.Scanned++
		if !sel.MatchHeaders(m.Headers) {
			return nil
		}
		meta := s.ParseMeta(sel.DLQ, m)
		v := sel.Match(meta)
		if v == engine.Excluded {
			return nil
		}
		if v == engine.Selected && sel.Limit > 0 && selected >= sel.Limit {
			return errStopScan
		}
		if v == engine.Selected {
			arr.Add(meta)
		}
		p.Matched++
		// What is shown of the message is redacted; what is matched and
		// frozen is not.
		view := meta
		red.headers(m, &view)
		if _, fresh := rows.Add(meta, v == engine.Parked); fresh && len(p.Messages) < s.cfg.Tune.ListRows {
			if len(p.Messages) < s.cfg.Tune.Samples {
				view.Excerpt = red.excerpt(m, &view, s.cfg.ExcerptBytes)
				view.Headers = red.shownHeaders(m)
			}
			p.Messages = append(p.Messages, engine.PreviewMessage{Meta: view, Parked: v == engine.Parked})
		}
		if v == engine.Selected {
			selected++
		}
		return nil
	})
	rows.scanned()
	p.Rows = len(rows.rows)
	for i := range p.Messages {
		p.Messages[i].Count = int(rows.rows[i].count)
	}
	var rbe *engine.ReadBudgetError
	if errors.As(err, &rbe) {
		return engine.ScanInfo{}, fmt.Errorf("engine: preview %s: %w", sel.DLQ, rbe)
	}
	if err != nil && !errors.Is(err, errStopScan) {
		return engine.ScanInfo{}, fmt.Errorf("engine: preview %s: scan: %w", sel.DLQ, err)
	}
	if s.d.ScanObserver != nil {
		s.d.ScanObserver.ScanObserved(info.Read, info.Duration)
	}
	return info, nil
}

// previewReturns sets how a replay of p would find the copies that come
// back, and, when a tap finds them, p's read budget for steps that read
// the DLQ only to move.
func (s *Service) previewReturns(ctx context.Context, p *engine.Preview) {
	p.Returns = s.returnsView(ctx, p)
	if p.Budget != nil && p.Returns.Mode == engine.ReturnsTap {
		// A tap finds the returns: a step reads the DLQ once, to move.
		p.Budget = s.budgetView(p.DLQ, p.Selected, 0)
		for i := range p.Problems {
			if p.Problems[i].Kind == engine.ProblemDeliveryLimit {
				p.Problems[i].Detail = budgetDetail(p.DLQ, p.Budget, p.Selected, 0)
			}
		}
	}
}

// partialRead is the problem a preview leads with when its scan could not
// see the whole DLQ: how much it read out of how many, and that the token
// covers only what it read. A scan ended by limit= is not partial.
func partialRead(p *engine.Preview) (engine.Problem, bool) {
	c := p.Coverage
	if !c.Short && c.OtherConsumers == 0 && c.HeldElsewhere == 0 {
		return engine.Problem{}, false
	}
	total := max(c.Queued, c.Read+c.HeldElsewhere)
	d := fmt.Sprintf("only %d of the %d message(s) in %s could be read", c.Read, total, p.DLQ.Name)
	if h := p.HeldByReplay; h != nil {
		// dlqbot's own replay holds them: the preview did not wait for it.
		d += fmt.Sprintf(": %s (dlqbot replaying this DLQ: its read holds them, and it sends those it selected). This preview and its token cover only what was read; preview again once that replay has ended", h.Words())
		return engine.Problem{Kind: engine.ProblemPartialRead, Queue: p.DLQ.Name, Messages: c.HeldElsewhere, Detail: d}, true
	}
	switch {
	case c.HeldElsewhere > 0 && c.OtherConsumers > 0:
		d += fmt.Sprintf(": %d other consumer(s) held about %d of them unacknowledged", c.OtherConsumers, c.HeldElsewhere)
	case c.HeldElsewhere > 0:
		d += fmt.Sprintf(": another client held or took %d of them", c.HeldElsewhere)
	default:
		d += fmt.Sprintf(": %d other consumer(s) were reading it, and may hold messages this preview did not see", c.OtherConsumers)
	}
	d += ". This preview and its token cover only what was read; preview again once the other reader has let go"
	return engine.Problem{Kind: engine.ProblemPartialRead, Queue: p.DLQ.Name, Messages: c.HeldElsewhere, Detail: d}, true
}

// returnsView works out p's ReturnsView. It changes nothing: the tap is
// declared by the replay, before its first publish.
func (s *Service) returnsView(ctx context.Context, p *engine.Preview) engine.ReturnsView {
	v := engine.ReturnsView{Mode: engine.ReturnsReread}
	var reason string
	st, err := s.d.Taps.TapState(ctx, p.DLQ.Name)
	switch {
	case err != nil:
		reason = "the DLQ's bindings could not be read: " + err.Error()
	case st.Mode == engine.ReturnsTap:
		v.Mode, v.Tap = engine.ReturnsTap, st.Queue
		v.Detail = fmt.Sprintf("returns will be found through the tap queue %s, which receives every dead letter routed to %s: the DLQ is not re-read", st.Queue, p.DLQ.Name)
		return v
	default:
		reason = st.Reason
	}
	v.Reads = defaultSteps(p.Selected)
	v.Detail = fmt.Sprintf("returns will be found by re-reading the DLQ: %d read(s) of all of %s (one per step), each giving every message back", v.Reads, p.DLQ.Name)
	if p.Selected <= engine.TailKeep && p.DLQ.Type == "classic" {
		// Reads is the worst case: the cursor's tail (engine/replay/settle_tail.go)
		// makes none while it can tell; only a classic DLQ's replay
		// reads with it (tailReads).
		v.Detail = "returns will be found at the DLQ's tail by the replay's own read of it, which holds what it passed unacked until the replay ends; only where that read cannot tell (another consumer on the DLQ, another dlqbot replay reading it) by " + v.Detail[len("returns will be found by "):]
	}
	if p.DLQ.Type == "quorum" {
		v.Detail += " and costing it a delivery attempt"
	}
	v.Detail += "; " + reason + ". Bind the DLQ to a dead-letter exchange to avoid the re-reads"
	return v
}

// defaultSteps is how many canary steps a replay of n messages takes with
// the default step and cap.
func defaultSteps(n int) int {
	steps := 0
	for sent := 0; sent < n; {
		steps++
		sent += engine.StepSize(engine.DefaultStep, engine.DefaultCap, steps)
	}
	return steps
}

// canary fills the preview's first-step account (FirstStepDepth,
// CanaryClasses, Classes) from its rows, once their targets are known.
// Rows of several row classes may share a target and failure group: each
// pair is numbered once.
func (s *Service) canary(p *engine.Preview, r *previewRows) {
	number := map[[2]string]int{}
	byRowClass := make([]int, len(r.classes))
	for c := range r.classes {
		k := [2]string{r.target[c], r.classes[c].group}
		n, ok := number[k]
		if !ok {
			n = len(number)
			number[k] = n
		}
		byRowClass[c] = n
	}
	p.CanaryClasses, p.Classes, p.FirstStepDepth = engine.FirstStepCover(engine.DefaultStep, s.cfg.CanaryDepth,
		func(yield func(count, class, seq int) bool) {
			for i, row := range r.rows {
				if r.targetOf(i) == "" {
					continue
				}
				if !yield(int(row.count), byRowClass[row.class], row.seq) {
					return
				}
			}
		})
}

// freeze stores the replayable part of p under a new token.
func (s *Service) freeze(ctx context.Context, sel engine.Selection, p *engine.Preview, r *previewRows) error {
	f := engine.Frozen{
		DLQ: sel.DLQ, Vhost: s.cfg.Vhost, Selection: p.Selection, To: sel.To,
		Requester: p.Requester, CreatedAt: s.d.Clock.Now(), Total: p.Selected, ParkAfter: sel.ParkLimit(),
		Proof: p.Proof, Card: engine.CardOf(p),
	}
	f.Each = func(yield func(engine.Item) bool) {
		for i, row := range r.rows {
			q := r.targetOf(i)
			if q == "" {
				continue
			}
			if !yield(engine.Item{ID: r.id(i), Count: int(row.count), Target: q, Group: r.classes[row.class].group, Seq: row.seq}) {
				return
			}
		}
	}
	for _, t := range p.Targets {
		f.Targets = append(f.Targets, engine.TargetSnapshot{Queue: t.Queue, Exists: t.Exists, Consumers: t.Consumers, Messages: t.Messages,
			ConsumersSinceFailure: t.ConsumersSinceFailure})
	}
	tok, err := s.d.Tokens.Save(ctx, f, s.cfg.Tune.TokenTTL)
	if err != nil {
		return fmt.Errorf("engine: preview: save token: %w", err)
	}
	p.Token = tok
	p.ExpiresAt = f.CreatedAt.Add(s.cfg.Tune.TokenTTL).UTC().Format(time.RFC3339)
	return nil
}
