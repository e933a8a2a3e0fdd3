package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine/letter"
	"github.com/stroma/dlqbot/engine/proof"
)

// Problem is one thing that would go wrong, with how many messages it hits.
type Problem struct {
	Kind     ProblemKind `json:"kind"`
	Queue    string      `json:"queue,omitempty"`
	Messages int         `json:"messages"`
	Detail   string      `json:"detail"`
	// InvalidTargets counts, of a no_target problem's messages, those
	// whose headers name a queue that is not a valid queue name
	// (Meta.BadTarget).
	InvalidTargets int `json:"invalid_targets,omitempty"`
}

// TargetView summarises the selected messages bound for one queue.
type TargetView struct {
	Queue     string                `json:"queue"`
	Exists    bool                  `json:"exists"`
	Consumers int                   `json:"consumers"`
	Messages  int                   `json:"messages"`
	Reasons   map[letter.Reason]int `json:"reasons"`
	// ConsumersSinceFailure says whether the queue's consumers connected
	// after LastFailure, the latest time its selected messages failed
	// (see preview_targets.go); ConsumerConns are the consumers' connections
	// as the management API lists them (empty when it was not asked or
	// could not tell). Json "consumers_since_failure", "last_failure",
	// "consumer_connections".
	ConsumersSinceFailure Since          `json:"consumers_since_failure"`
	LastFailure           time.Time      `json:"last_failure,omitzero"`
	ConsumerConns         []ConsumerConn `json:"consumer_connections,omitempty"`
	// MixedScripts is set when the queue's name mixes the letters of
	// scripts that look alike (MixedScripts names them): it may read as
	// another queue's name. Json "mixed_scripts", absent when false.
	MixedScripts bool `json:"mixed_scripts,omitempty"`
}

// Since says whether a target's consumers were restarted since its
// messages failed (TargetView.ConsumersSinceFailure).
type Since string

// The verdicts on a target's consumers.
const (
	// SinceRestarted: some consumer's connection opened after the latest
	// failure.
	SinceRestarted Since = "restarted"
	// SinceUnchanged: every consumer's connection was open before the
	// latest failure: the processes that failed the messages are likely
	// the ones still running.
	SinceUnchanged Since = "unchanged"
	// SinceNone: the target has no consumers (or does not exist).
	SinceNone Since = "none"
	// SinceUnknown: the messages carry no failure time, or the management
	// API could not say (down, slow, lagging, or a connection opened in
	// the very second of the failure).
	SinceUnknown Since = "unknown"
)

// PreviewMessage is one distinct selected (or parked) message.
type PreviewMessage struct {
	letter.Meta
	Count    int    `json:"count"`
	Target   string `json:"target,omitempty"`
	Parked   bool   `json:"parked,omitempty"`
	Replayed []Sent `json:"replayed,omitempty"`
}

// Preview is what a replay of a selection would do. Making one changes nothing.
type Preview struct {
	// proof is what the token freezes for its approval (Frozen.Proof).
	proof     *proof.Proof
	Token     string    `json:"token,omitempty"`
	ExpiresAt string    `json:"expires_at,omitempty"`
	DLQ       QueueInfo `json:"dlq"`
	Selection string    `json:"selection"`
	Requester string    `json:"requester"`
	Scanned   int       `json:"scanned"`
	// Coverage is how much of the DLQ the scan saw; a scan that could not
	// see all of it leads the problems with ProblemPartialRead, and the
	// token covers only what was read.
	Coverage Coverage `json:"coverage"`
	Selected int      `json:"selected"` // copies in the token
	// FirstStepDepth is how many messages of the DLQ, from its head, the
	// replay's first step (of DefaultStep messages, and a copy of every
	// class within Config.CanaryDepth) must read: one past the DLQ
	// position of its last copy. The steps read on from there, once in
	// all (see cursor.go). 0 when nothing is selected.
	FirstStepDepth int `json:"first_step_depth"`
	// CanaryClasses is how many classes (target × failure group) the
	// replay's first step holds a copy of; Classes how many the selection
	// has. Classes first met deeper than Config.CanaryDepth join in the
	// steps that reach them.
	CanaryClasses int          `json:"canary_classes"`
	Classes       int          `json:"classes"`
	Distinct      int          `json:"distinct"` // distinct ids in the token
	Parked        int          `json:"parked"`
	Problems      []Problem    `json:"problems"`
	Targets       []TargetView `json:"targets"`
	// Messages lists the first Config.ListRows distinct matching messages
	// (selected, parked or without a target) in DLQ order; Rows and
	// Matched count all of them, and their copies.
	Messages []PreviewMessage `json:"messages"`
	Rows     int              `json:"rows"`
	Matched  int              `json:"matched"`
	// Arrivals is when the selected messages were dead-lettered (see arrivals.go).
	Arrivals *Arrivals `json:"arrivals,omitempty"`
	// Budget is the DLQ's read budget; nil when reads cost no delivery
	// attempts (classic queues, no limit, RabbitMQ 4.3+).
	Budget *BudgetView `json:"read_budget,omitempty"`
	// Returns says how a replay would find the copies that come back.
	Returns ReturnsView `json:"returns"`
	// HeldByReplay, when set, names the dlqbot replays of this DLQ whose
	// reads held messages the preview could not see, and how many it
	// could not see (of Coverage.HeldElsewhere): the preview does not wait
	// for a replay's read (readers.go), and those messages are not in its
	// token. Json "held_by_replay".
	HeldByReplay *HeldBy `json:"held_by_replay,omitempty"`
}

// Preview scans sel.DLQ without changing it, works out what a replay would
// do and, when anything is replayable, freezes it under a new token.
func (s *Service) Preview(ctx context.Context, sel Selection, requester string) (*Preview, error) {
	if sel.Vhost != "" && sel.Vhost != s.cfg.Vhost {
		return nil, fmt.Errorf("engine: preview %s: %w: this bot works in vhost %q, not %q (run one per vhost)", sel.DLQ, ErrUnsupported, s.cfg.Vhost, sel.Vhost)
	}
	dlq, err := s.d.Broker.Inspect(ctx, sel.DLQ)
	if err != nil {
		return nil, fmt.Errorf("engine: preview %s: %w", sel.DLQ, err)
	}
	if !dlq.Exists {
		return nil, fmt.Errorf("engine: preview %s: %w", sel.DLQ, ErrQueueNotFound)
	}
	p := &Preview{DLQ: dlq, Selection: sel.String(), Requester: requester, Problems: []Problem{}}
	proof := s.prover.Begin(ctx, proofQueue(dlq)) // before the read: see package proof
	defer func() {
		if p.Token == "" {
			s.prover.Close(ctx, proof) // no token will be approved by it
		}
	}()
	rows := newPreviewRows()
	arr := newArrivals(s.d.Clock.Now())
	red := newRedactor(s.d.Redactor, sel.DLQ)
	began := s.d.Clock.Now()
	info, err := s.previewScan(ctx, sel, requester, p, rows, arr, red)
	if err != nil {
		return nil, err
	}
	p.Arrivals = arr.view()
	red.arrivals(p.Arrivals)
	p.Coverage = info.Coverage
	p.HeldByReplay = s.heldByReplays(ctx, sel.DLQ, began, info.Coverage)
	p.proof = s.prover.Keep(ctx, proof, proofRead(info))
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
		p.Problems = append([]Problem{pr}, p.Problems...)
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
func (s *Service) previewScan(ctx context.Context, sel Selection, requester string, p *Preview, rows *previewRows, arr *arrivals, red *redactor) (ScanInfo, error) {
	selected := 0
	info, err := s.scanWhole(ctx, sel.DLQ, "a preview of "+requester, func(m letter.Message) error {
		p.Scanned++
		if !sel.MatchHeaders(m.Headers) {
			return nil
		}
		meta := s.ParseMeta(sel.DLQ, m)
		v := sel.Match(meta)
		if v == Excluded {
			return nil
		}
		if v == Selected && sel.Limit > 0 && selected >= sel.Limit {
			return errStopScan
		}
		if v == Selected {
			arr.add(meta)
		}
		p.Matched++
		// What is shown of the message is redacted; what is matched and
		// frozen is not.
		view := meta
		red.headers(m, &view)
		if _, fresh := rows.add(meta, v == Parked); fresh && len(p.Messages) < s.cfg.ListRows {
			if len(p.Messages) < s.cfg.Samples {
				view.Excerpt = red.excerpt(m, &view, s.cfg.ExcerptBytes)
				view.Headers = red.shownHeaders(m)
			}
			p.Messages = append(p.Messages, PreviewMessage{Meta: view, Parked: v == Parked})
		}
		if v == Selected {
			selected++
		}
		return nil
	})
	rows.scanned()
	p.Rows = len(rows.rows)
	for i := range p.Messages {
		p.Messages[i].Count = int(rows.rows[i].count)
	}
	var rbe *ReadBudgetError
	if errors.As(err, &rbe) {
		return ScanInfo{}, fmt.Errorf("engine: preview %s: %w", sel.DLQ, rbe)
	}
	if err != nil && !errors.Is(err, errStopScan) {
		return ScanInfo{}, fmt.Errorf("engine: preview %s: scan: %w", sel.DLQ, err)
	}
	if s.d.ScanObserver != nil {
		s.d.ScanObserver.ScanObserved(info.Read, info.Duration)
	}
	return info, nil
}

// previewReturns sets how a replay of p would find the copies that come
// back, and, when a tap finds them, p's read budget for steps that read
// the DLQ only to move.
func (s *Service) previewReturns(ctx context.Context, p *Preview) {
	p.Returns = s.returnsView(ctx, p)
	if p.Budget != nil && p.Returns.Mode == ReturnsTap {
		// A tap finds the returns: a step reads the DLQ once, to move.
		p.Budget = s.budgetView(p.DLQ, p.Selected, 0)
		for i := range p.Problems {
			if p.Problems[i].Kind == ProblemDeliveryLimit {
				p.Problems[i].Detail = budgetDetail(p.DLQ, p.Budget, p.Selected, 0)
			}
		}
	}
}

// partialRead is the problem a preview leads with when its scan could not
// see the whole DLQ: how much it read out of how many, and that the token
// covers only what it read. A scan ended by limit= is not partial.
func partialRead(p *Preview) (Problem, bool) {
	c := p.Coverage
	if !c.Short && c.OtherConsumers == 0 && c.HeldElsewhere == 0 {
		return Problem{}, false
	}
	total := max(c.Queued, c.Read+c.HeldElsewhere)
	d := fmt.Sprintf("only %d of the %d message(s) in %s could be read", c.Read, total, p.DLQ.Name)
	if h := p.HeldByReplay; h != nil {
		// dlqbot's own replay holds them: the preview did not wait for it.
		d += fmt.Sprintf(": %s (dlqbot replaying this DLQ: its read holds them, and it sends those it selected). This preview and its token cover only what was read; preview again once that replay has ended", h.Words())
		return Problem{Kind: ProblemPartialRead, Queue: p.DLQ.Name, Messages: c.HeldElsewhere, Detail: d}, true
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
	return Problem{Kind: ProblemPartialRead, Queue: p.DLQ.Name, Messages: c.HeldElsewhere, Detail: d}, true
}
