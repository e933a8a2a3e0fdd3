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
	start := rn.s.d.Clock.Now()
	k := rn.r.Step + 1
	size := stepSize(rn.r.Params.Step, rn.r.Params.Cap, k)
	// The copies in doubt go first when a resend was asked for, in steps
	// of the same sizes.
	rn.resending = rn.rs.left() > 0
	var pick map[string]int
	if rn.resending {
		pick = rn.rs.next(size)
	} else {
		// Another replay of the same DLQ may hold some of them: those are
		// its to send (out of the plan), and this step sends the rest.
		for {
			pick = rn.plan.next(size, k == 1)
			if err := rn.claim(ctx, pick); err != nil {
				return StepResult{Step: k}, nil, fmt.Errorf("engine: run %s: step %d: %w", rn.r.ID, k, err)
			}
			if len(pick) > 0 || rn.plan.remaining() == 0 {
				break
			}
		}
		if len(pick) == 0 {
			// Everything left was another replay's: no step to send.
			return StepResult{Step: rn.r.Step}, nil, rn.put(ctx)
		}
	}
	rn.stepSent = map[string]bool{}
	defer rn.settleClaims(ctx, rn.stepSent)
	left := 0
	for _, n := range pick {
		left += n
	}
	rn.r.Step = k
	res = StepResult{Step: k, Planned: left}
	if err := rn.put(ctx); err != nil {
		return res, nil, err
	}
	text := fmt.Sprintf("step %d: sending %d message(s)", k, left)
	if rn.resending {
		text = fmt.Sprintf("step %d: sending %d copy(ies) in doubt again, marked %s: true", k, left, PossibleDuplicateHeader)
	}
	rn.emit(ctx, EventStepStarted, &res, text)
	defer func() {
		if rn.resending {
			rn.resending = false
			rn.rs.endStep(false) // not found (held elsewhere), or the step stopped: resent later
			rn.r.ResendInDoubt = rn.rs.left() > 0
		}
	}()

	baseline := rn.sampleTargets(ctx, pick)
	look := rn.newLook(ctx) // before the publishes: the DLQ's size and its tap's arrivals
	sentPer := map[string]int{}
	mr, moveErr := rn.pass(ctx, pick, &left, &res, sentPer)
	if moveErr == nil && mr.Stopped == nil && left > 0 {
		// Not every picked message was found: account for each of them
		// before anything is called missing (see account.go).
		mr, moveErr = rn.findRest(ctx, pick, &left, &res, sentPer, mr)
	}
	if rn.resending {
		rn.rs.endStep(false)
		rn.r.ResendInDoubt = rn.rs.left() > 0
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
			res.Duration = rn.s.d.Clock.Now().Sub(start)
			return res, stop, err
		}
	} else {
		res.Observation = "nothing was sent in this step"
	}
	res.Duration = rn.s.d.Clock.Now().Sub(start)
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
		out[i] = LedgerEntry{ReplayID: rn.r.ID, DLQ: rn.r.DLQ, ID: m.ID, Target: m.Target, Seq: m.Seq, At: now, Pending: pending, Copy: m.Copy}
	}
	return out
}

// progressEvery is how often a step in progress writes its sent count.
const progressEvery = 500 * time.Millisecond

// progress counts n more confirmed copies and, at most every
// progressEvery, writes the record so others see a long step advance.
func (rn *run) progress(ctx context.Context, n int) {
	rn.r.Sent += n
	now := rn.s.d.Clock.Now()
	if now.Sub(rn.lastProgress) < progressEvery {
		return
	}
	rn.lastProgress = now
	if err := rn.put(ctx); err != nil {
		// The next write carries the count again; a lost lease stops the
		// move via Intend.
		rn.warn("write progress", err)
	}
}

// abandon withdraws the ledger intents of copies certainly not sent, so a
// later resume may try them again; copies lost in flight stay pending
// ("maybe sent") and are never re-sent.
func (rn *run) abandon(ctx context.Context, mr MoveResult) error {
	if rn.resending {
		// A resend's intent is the first copy's, which may have arrived:
		// it stays pending; what was not published is resent later.
		for _, m := range mr.Unsent {
			if e, ok := rn.rs.entry(m); ok {
				rn.rs.giveBack(e)
			}
		}
		return nil
	}
	gone := append([]Moved(nil), mr.Unsent...)
	for _, f := range mr.Failed {
		if f.Kind.notSent() {
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
