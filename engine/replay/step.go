package replay

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/review"
)

// step sends one canary step and waits for it to settle, and returns the
// step it judged. stopErr is why sending stopped early (pause, cancel, lost
// lease, shutdown); err is a failure to talk to the broker or the store.
//
// Past the canary phase an unpaced replay's step may instead stay unjudged
// while the next one sends (settle_overlap.go): step then returns a zero
// StepResult (nothing judged yet), and the next call sends the next step
// and judges this one. A step left unjudged when the run halts is dropped
// unjudged, like a step a pause interrupts while it settles.
func (rn *run) step(ctx context.Context) (engine.StepResult, error, error) {
	older := rn.jd.pending
	if older != nil && !rn.jd.mayOverlap(older) {
		rn.jd.pending = nil
		return rn.judge(ctx, older, nil, false)
	}
	p, stopErr, err := rn.send(ctx)
	rn.jd.opened(p)
	rn.jd.pending = nil
	if p == nil || err != nil || (stopErr != nil && !errors.Is(stopErr, errTripped)) {
		if older != nil && p == nil && err == nil && stopErr == nil {
			return rn.judge(ctx, older, nil, false) // nothing more to send
		}
		if p == nil {
			return engine.StepResult{Step: rn.r.Step}, stopErr, err
		}
		return p.res, stopErr, err
	}
	if older == nil {
		if rn.jd.mayOverlap(p) {
			rn.jd.pending = p
			return engine.StepResult{}, nil, nil
		}
		return rn.judge(ctx, p, nil, false)
	}
	tripped := errors.Is(stopErr, errTripped)
	res, stop, err := rn.judge(ctx, older, p, tripped)
	if stop == nil && err == nil && tripped && res.Returned == 0 {
		return res, errTripped, nil // seen by the breaker, not by the step judged
	}
	return res, stop, err
}

// send sends the next step and begins its settling (nil: there was no step
// to send, the rest being another replay's). stopErr is why sending
// stopped early; errTripped when returns were seen while it sent beside an
// unjudged step.
func (rn *run) send(ctx context.Context) (p *sentStep, stopErr, err error) {
	start := rn.s.d.Clock.Now()
	k := rn.r.Step + 1
	size := engine.StepSize(rn.r.Params.Step, rn.r.Params.Cap, k)
	pick, walk, err := rn.pickFirst(ctx, k, size)
	if err != nil {
		return &sentStep{res: engine.StepResult{Step: k}}, nil, fmt.Errorf("engine: run %s: step %d: %w", rn.r.ID, k, err)
	}
	if !rn.rec.resending && len(pick) == 0 {
		// Everything left was another replay's: no step to send.
		return nil, nil, rn.put(ctx)
	}
	planned, targets := rn.stepScope(pick, walk)
	rn.stepSent = newSentSet(rn.plan)
	defer func() { rn.own.settleClaims(ctx, rn.stepSent) }()
	rn.r.Step = k
	res := engine.StepResult{Step: k, Planned: planned}
	if err := rn.put(ctx); err != nil {
		return &sentStep{res: res}, nil, err
	}
	rn.emit(ctx, engine.EventStepStarted, &res, rn.stepText(k, planned))
	if rn.rec.resending {
		defer rn.rec.seekResend(ctx)() // resend.go
	}
	defer func() {
		if rn.rec.resending {
			rn.rec.resending = false
			rn.rec.rs.endStep(false) // not found (held elsewhere), or the step stopped: resent later
			rn.r.ResendInDoubt = rn.rec.rs.left() > 0
		}
	}()

	baseline := rn.jd.sampleTargets(ctx, targets)
	look := rn.ret.newLook(ctx, rn.toSend() <= planned) // before the publishes
	sentPer := map[string]int{}
	rn.openCursor(ctx)
	stopBreaker := rn.jd.breaker(ctx) // returns of the unjudged step stop this one's sends
	mr, moveErr, sentN, unsure := rn.sendChunks(ctx, pick, walk, &res, sentPer)
	stopBreaker()
	rn.jd.addUnsettled(sentPer)
	rn.jd.countSent(sentPer, unsure, moveErr)
	rn.boundCursor(ctx)
	rn.ret.bp.removed += sentN // the originals of the copies sent left the DLQ
	if rn.rec.resending {
		rn.rec.rs.endStep(false)
		rn.r.ResendInDoubt = rn.rec.rs.left() > 0
	}
	if err := rn.put(ctx); err != nil {
		return &sentStep{res: res}, nil, err
	}
	if moveErr != nil {
		rn.rec.keepCut(res, sentPer, baseline, look) // settled after a reconnect (reconcile.go)
		return &sentStep{res: res}, nil, fmt.Errorf("engine: run %s: step %d: %w", rn.r.ID, k, moveErr)
	}
	if mr.Stopped != nil && !errors.Is(mr.Stopped, errTripped) {
		return &sentStep{res: res, start: start}, mr.Stopped, nil // a pause acts now
	}
	p = rn.jd.beginSettle(ctx, res, sentPer, baseline, look)
	rn.jd.noAckBefore(p)
	p.start = start
	return p, mr.Stopped, nil
}

// pickFirst picks the first chunk of step k (of size copies) and sets
// rn.resending. The copies in doubt go first when a resend was asked for,
// in steps of the same sizes; otherwise the step walks the plan (walk),
// and what another replay of the same DLQ holds is its to send (out of
// the plan): the step sends the rest. An empty pick (not resending): all
// that was left was another replay's.
func (rn *run) pickFirst(ctx context.Context, k, size int) (pick map[string]int, walk *engine.StepWalk, err error) {
	rn.rec.resending = rn.rec.rs.left() > 0
	rn.beside = rn.ret.mode == engine.ReturnsReread && (!rn.ret.tailReads(ctx) || rn.own.replaysReading(ctx)) // cursor.go
	if rn.rec.resending {
		// A resend reads the DLQ afresh: the cursor must hold nothing.
		rn.releaseCursor("a resend of copies in doubt")
		return rn.rec.rs.Next(size), nil, nil
	}
	// walk is the step's walk over the plan, sent in chunks of at most
	// Config.Tune.StepChunk picks (nil for a resend: one pick).
	for {
		if walk == nil || walk.Done {
			walk = rn.plan.Start(size, k == 1)
		}
		if pick, err = rn.claimChunk(ctx, walk, nil); err != nil {
			return nil, walk, err
		}
		if len(pick) > 0 || rn.plan.Remaining() == 0 {
			return pick, walk, nil
		}
	}
}

// stepScope is how many copies a step sends, counting all of walk's
// chunks (the later ones counted without being picked), and where they
// go.
func (rn *run) stepScope(pick map[string]int, walk *engine.StepWalk) (planned int, targets map[string]bool) {
	planned, targets = engine.CopiesIn(pick), map[string]bool{}
	for id := range pick {
		targets[rn.plan.Target(id)] = true
	}
	if walk != nil && !walk.Done {
		rest, more := walk.Count()
		planned += rest
		maps.Copy(targets, more)
	}
	return planned, targets
}

// stepText words the start of step k, of planned copies.
func (rn *run) stepText(k, planned int) string {
	if rn.rec.resending {
		return fmt.Sprintf("step %d: sending %d copy(ies) in doubt again, marked %s: true", k, planned, engine.PossibleDuplicateHeader)
	}
	return fmt.Sprintf("step %d: sending %d message(s)", k, planned)
}

// sendChunks sends the step's chunks, one after the other, from pick
// (the first) on, claiming each next one of walk as the one before is
// sent. mr and moveErr are the last chunk's move; sentN counts the copies
// all the moves sent, and unsure keeps what countSent needs of each (its
// failures and unacked originals): both come from rn.stepMoves, which
// every pass adds to, findRest's re-reads included (the deferred
// assignment sets them on every return).
func (rn *run) sendChunks(ctx context.Context, pick map[string]int, walk *engine.StepWalk, res *engine.StepResult, sentPer map[string]int) (mr engine.MoveResult, moveErr error, sentN int, unsure engine.MoveResult) {
	left := engine.CopiesIn(pick)
	var chunkErr error
	rn.stepMoves = stepMoves{}
	defer func() { sentN, unsure = rn.stepMoves.sent, rn.stepMoves.unsure }()
	for {
		mr, moveErr = rn.pass(ctx, pick, &left, res, sentPer)
		if moveErr == nil && mr.Stopped == nil && left > 0 {
			// Not every picked message was found: account for each of them
			// before anything is called missing (see account_find.go), with reads
			// that must not find dlqbot's own cursor holding messages.
			rn.releaseCursor("a step did not find all its picks")
			mr, moveErr = rn.findRest(ctx, pick, &left, res, sentPer, mr)
		}
		if walk == nil || walk.Done || moveErr != nil || mr.Stopped != nil || res.HeldElsewhere > 0 {
			// Held elsewhere: the rest of the step stays planned, for a
			// later step, rather than wait HeldWait once more per chunk.
			return mr, moveErr, 0, engine.MoveResult{}
		}
		rn.own.settleClaims(ctx, rn.stepSent)
		rn.stepSent = newSentSet(rn.plan)
		pick = nil
		for len(pick) == 0 && chunkErr == nil && !walk.Done {
			pick, chunkErr = rn.claimChunk(ctx, walk, &res.Planned) // a chunk all another replay's: the next one
		}
		if chunkErr != nil {
			return mr, chunkErr, 0, engine.MoveResult{}
		}
		if len(pick) == 0 {
			return mr, moveErr, 0, engine.MoveResult{}
		}
		left = engine.CopiesIn(pick)
		rn.openCursor(ctx) // released when a chunk looked for the rest of its picks
	}
}

// claimChunk picks walk's next chunk (Config.Tune.StepChunk copies, when the
// step reads through the cursor) and claims it: what another replay holds
// is taken out of the pick and (when planned is set) of *planned.
func (rn *run) claimChunk(ctx context.Context, walk *engine.StepWalk, planned *int) (map[string]int, error) {
	chunk := rn.s.cfg.Tune.StepChunk
	if _, ok := rn.cursorMover(); !ok {
		// Without a cursor each move reads the DLQ from its head and gives
		// back what it passed: a chunk would be one more read (and on a
		// quorum DLQ one more delivery of each message passed), so the
		// step is one.
		chunk = math.MaxInt
	}
	pick := walk.More(chunk)
	before := engine.CopiesIn(pick)
	if err := rn.own.claim(ctx, pick); err != nil {
		return nil, err
	}
	if planned != nil {
		*planned -= before - engine.CopiesIn(pick)
	}
	return pick, nil
}

// judge waits until step p has settled, watching also (the step sent since,
// unjudged; may be nil) meanwhile, and returns p's result; see settleSteps
// and keepOrClose (tripped: the breaker cut also's sends).
func (rn *run) judge(ctx context.Context, p, also *sentStep, tripped bool) (engine.StepResult, error, error) {
	if p.res.Sent > 0 {
		stop, err := rn.jd.settleSteps(ctx, p, also)
		if stop != nil || err != nil {
			// Sent, not judged: halt records the state asked for.
			p.res.Duration = rn.s.d.Clock.Now().Sub(p.start)
			return p.res, stop, err
		}
	} else {
		p.res.Observation = "nothing was sent in this step"
	}
	p.res.Duration = rn.s.d.Clock.Now().Sub(p.start)
	rn.jd.noteSettled(p)
	if p.rejudge != nil {
		p.res.Observation = judgedAgain(p.rejudge, p.res.Observation)
		rn.r.Unjudged = nil
	}
	if also != nil {
		rn.jd.keepOrClose(p, also, tripped)
	}
	if err := rn.put(ctx); err != nil {
		return p.res, nil, err
	}
	return p.res, nil, nil
}
func (rn *run) entries(batch []engine.Moved, pending bool) []engine.LedgerEntry {
	now := rn.s.d.Clock.Now()
	out := make([]engine.LedgerEntry, len(batch))
	for i, m := range batch {
		out[i] = engine.LedgerEntry{ReplayID: rn.r.ID, DLQ: rn.r.DLQ, ID: m.ID, Target: m.Target, Seq: m.Seq, At: now, Pending: pending, Copy: m.Copy}
	}
	return out
}

// progressEvery is how often a step in progress writes its sent count.
const progressEvery = 500 * time.Millisecond

// progress counts n more confirmed copies and, at most every
// progressEvery, writes the record so others see a long step advance. A
// step sending through the cursor also refreshes the run's reader mark
// every markEvery: a step longer than the mark's life (a paced one, or
// one of many chunks) would otherwise look to another replay seeking its
// picks like a client that is not dlqbot, held past its HeldWait.
func (rn *run) progress(ctx context.Context, n int) {
	rn.r.Sent += n
	now := rn.s.d.Clock.Now()
	if now.Sub(rn.lastProgress) < progressEvery {
		return
	}
	rn.flushProgress(ctx)
	if rn.cur != nil && now.Sub(rn.own.marked) >= review.MarkEvery {
		rn.own.markReading(ctx, false)
	}
}

// flushProgress writes the replay's record now, with every copy sent so
// far: progress writes at most every progressEvery, so a step that waits
// after its sends (for messages another client holds) writes first, or
// its status would show fewer sent than it sent for the whole wait.
func (rn *run) flushProgress(ctx context.Context) {
	rn.lastProgress = rn.s.d.Clock.Now()
	if err := rn.put(ctx); err != nil {
		// The next write carries the count again; a lost lease stops the
		// move via Intend.
		rn.Warn("write progress", err)
	}
}

// abandon withdraws the ledger intents of copies certainly not sent, so a
// later resume may try them again; copies lost in flight stay pending
// ("maybe sent") and are never re-sent.
func (rn *run) abandon(ctx context.Context, mr engine.MoveResult) error {
	if rn.rec.resending {
		// A resend's intent is the first copy's, which may have arrived:
		// it stays pending; what was not published is resent later.
		for _, m := range mr.Unsent {
			if e, ok := rn.rec.rs.entry(m); ok {
				rn.rec.rs.giveBack(e)
			}
		}
		return nil
	}
	gone := append([]engine.Moved(nil), mr.Unsent...)
	for _, f := range mr.Failed {
		if f.Kind.NotSent() {
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

// stepMoves is what every move of a step did that the step books once its
// sends end: the copies sent, and those countSent cannot count (failed,
// or whose originals could not be acked). Every pass adds to it, a
// findRest's re-reads included, so none is lost when a later pass's
// result replaces an earlier one.
type stepMoves struct {
	sent   int
	unsure engine.MoveResult
}

// add books one move's result.
func (m *stepMoves) Add(mr engine.MoveResult) {
	m.sent += mr.SentN
	m.unsure.Failed = append(m.unsure.Failed, mr.Failed...)
	m.unsure.Unacked = append(m.unsure.Unacked, mr.Unacked...)
}

// stepBudget stops a replay before a step whose reads (its move and its
// look for returns) could bring a message of the DLQ to its delivery limit.
func (rn *run) stepBudget(ctx context.Context) error {
	rereads := engine.RereadsPerStep
	if rn.ret.mode == engine.ReturnsTap || rn.ret.tailing() {
		// The tap, or the cursor's tail (settle_tail.go): returns are
		// found without reading the DLQ again.
		rereads = 0
	}
	// A step that continues the run's cursor makes no new read: what the
	// cursor holds is given back once, when it is released (cursor.go).
	reads := 1
	if rn.cur != nil {
		reads = 0
	}
	if reads+rereads == 0 {
		// No read to budget: the DLQ's state is not read either (while a
		// cursor holds it the broker can take a quarter of a second to
		// answer, at every step).
		return nil
	}
	st, err := rn.s.d.Broker.Inspect(ctx, rn.r.DLQ)
	if err != nil || !st.Exists {
		return nil // the move itself reports a missing or unreachable DLQ
	}
	rest, _ := engine.ReadsNeeded(rn.plan.Remaining(), rn.r.Params, rereads)
	return engine.BudgetError(st, reads+rereads, engine.RaiseLimit(rn.s.cfg.Vhost, st, engine.SuggestedLimit(st, rest-1)))
}
