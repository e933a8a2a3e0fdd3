package engine

import (
	"context"
	"fmt"
	"time"
)

// step sends one canary step and waits for it to settle. stopErr is why
// sending stopped early (pause, cancel, lost lease, shutdown); err is a
// failure to talk to the broker or the store.
func (rn *run) step(ctx context.Context) (res StepResult, stopErr, err error) {
	start := time.Now()
	k := rn.r.Step + 1
	size := stepSize(rn.r.Params.Step, rn.r.Params.Cap, k)
	pick := rn.plan.next(size, k == 1)
	left := 0
	for _, n := range pick {
		left += n
	}
	rn.r.Step = k
	res = StepResult{Step: k, Planned: left}
	if err := rn.put(ctx); err != nil {
		return res, nil, err
	}
	rn.emit(ctx, EventStepStarted, &res, fmt.Sprintf("step %d: sending %d message(s)", k, left))

	baseline := rn.sampleTargets(ctx, pick)
	look := rn.newLook(ctx) // before the publishes: the DLQ's size and its tap's arrivals
	sentBefore := rn.r.Sent
	rn.lastProgress = time.Time{}
	rate := rn.r.Params.Rate
	if rate < 0 {
		rate = 0
	}
	mr, moveErr := rn.s.d.Mover.Move(ctx, MoveRequest{
		Queue: rn.r.DLQ,
		Pick: func(m Message) (Pick, bool) {
			if left == 0 {
				return Pick{}, false
			}
			id := ParseMeta(rn.r.DLQ, m).ID
			if pick[id] == 0 {
				return Pick{}, false
			}
			pick[id]--
			left--
			return Pick{ID: id, Target: rn.target[id]}, true
		},
		Satisfied: func() bool { return left == 0 },
		Rewrite: func(h map[string]any, _ Pick) map[string]any {
			return ReplayHeaders(h, rn.r.ID, rn.r.DLQ)
		},
		Window:   rn.s.cfg.Window,
		Rate:     rate,
		Continue: func() error { return rn.stopCause(ctx) },
		Intend: func(ctx context.Context, batch []Moved) error {
			if err := rn.hb.check(ctx); err != nil {
				return err
			}
			return rn.s.d.Ledger.Intend(ctx, rn.entries(batch, true))
		},
		Confirmed: func(ctx context.Context, batch []Moved) error {
			if err := rn.s.d.Ledger.Confirm(ctx, rn.entries(batch, false)); err != nil {
				return err
			}
			rn.progress(ctx, len(batch))
			return nil
		},
	})
	rn.r.Sent = sentBefore
	sentPer := map[string]int{}
	for _, m := range mr.Sent {
		rn.plan.drop(m.ID, 1)
		sentPer[m.Target]++
	}
	for _, m := range mr.Unacked {
		rn.plan.drop(m.ID, 1)
		sentPer[m.Target]++
	}
	res.Sent = len(mr.Sent) + len(mr.Unacked)
	rn.r.Sent += res.Sent
	rn.r.Duplicates += len(mr.Unacked)
	for _, f := range mr.Failed {
		rn.plan.drop(f.ID, 1)
		res.Failed++
		kind := f.Kind
		if kind == "lost" {
			// No confirm: maybe delivered, maybe not. Not "not delivered".
			kind = "in_doubt"
			rn.r.InDoubt++
		} else {
			rn.r.Failed++
		}
		rn.fail(Failure{ID: f.ID, Target: f.Target, Kind: kind, Detail: f.Detail})
	}
	if err := rn.abandon(ctx, mr); err != nil && moveErr == nil {
		moveErr = err
	}
	if moveErr == nil && mr.Stopped == nil && left > 0 {
		// The whole DLQ was read and these copies were not in it.
		for id, n := range pick {
			if n == 0 {
				continue
			}
			rn.plan.drop(id, n)
			rn.r.Missing += n
			res.Failed += n
			rn.fail(Failure{ID: id, Target: rn.target[id], Kind: "missing", Detail: fmt.Sprintf("%d copy(ies) no longer in %s", n, rn.r.DLQ)})
		}
	}
	if err := rn.put(ctx); err != nil {
		return res, nil, err
	}
	if moveErr != nil {
		return res, nil, fmt.Errorf("engine: run %s: step %d: %w", rn.r.ID, k, moveErr)
	}
	if mr.Stopped != nil {
		return res, mr.Stopped, nil
	}
	if res.Sent > 0 {
		look.removed = len(mr.Sent)
		stop, err := rn.settle(ctx, &res, sentPer, baseline, look)
		if stop != nil || err != nil {
			// Sent, not judged: halt records the state asked for.
			res.Duration = time.Since(start)
			return res, stop, err
		}
	} else {
		res.Observation = "nothing was sent in this step"
	}
	res.Duration = time.Since(start)
	rn.r.Settled += res.Settled
	if err := rn.put(ctx); err != nil {
		return res, nil, err
	}
	return res, nil, nil
}

func (rn *run) entries(batch []Moved, pending bool) []LedgerEntry {
	now := rn.s.d.Clock.Now()
	out := make([]LedgerEntry, len(batch))
	for i, m := range batch {
		out[i] = LedgerEntry{ReplayID: rn.r.ID, DLQ: rn.r.DLQ, ID: m.ID, Target: m.Target, Seq: m.Seq, At: now, Pending: pending}
	}
	return out
}

// progressEvery is how often a step in progress writes its sent count.
const progressEvery = 500 * time.Millisecond

// progress counts n more confirmed copies and, at most every
// progressEvery, writes the record so others see a long step advance.
func (rn *run) progress(ctx context.Context, n int) {
	rn.r.Sent += n
	if time.Since(rn.lastProgress) < progressEvery {
		return
	}
	rn.lastProgress = time.Now()
	_ = rn.put(ctx) // a failed write shows again at the next one; a lost lease stops the move via Intend
}

// abandon withdraws the ledger intents of copies certainly not sent, so a
// later resume may try them again; copies lost in flight stay pending
// ("maybe sent") and are never re-sent.
func (rn *run) abandon(ctx context.Context, mr MoveResult) error {
	gone := append([]Moved(nil), mr.Unsent...)
	for _, f := range mr.Failed {
		if f.Kind == "unroutable" || f.Kind == "nacked" || f.Kind == "refused" {
			gone = append(gone, f.Moved)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return rn.s.d.Ledger.Abandon(actx, rn.entries(gone, true))
}
