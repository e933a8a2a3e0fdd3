package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine/letter"
)

// A step accounts for every message it planned. A pass over the DLQ that
// did not find some of them proves nothing by itself: another client may
// hold them unacked (a preview, another replica's read whose requeues a
// quorum queue has not applied yet), or the read may have been cut short.
// So a message is called missing only when a pass that saw the whole DLQ
// (Coverage.Whole), with the broker reporting no unacknowledged message on
// it before and after that pass, did not find it. Until then the step
// waits for the other holder to let go and reads again, up to
// Config.HeldWait; what is still unaccounted for then is reported as held
// elsewhere and stays in the plan (the replay stops, resumable).

// pass runs one Move over the DLQ for what is still to find in pick and
// books its outcome into res, sentPer and the plan.
func (rn *run) pass(ctx context.Context, pick map[string]int, left *int, res *StepResult, sentPer map[string]int) (MoveResult, error) {
	sentBefore := rn.r.Sent
	rn.lastProgress = time.Time{}
	rate, paceHook := rn.paceOf(ctx)
	mr, moveErr := rn.move(ctx, MoveRequest{
		Queue: rn.r.DLQ,
		Pick: func(m letter.Message) (Pick, bool) {
			if rn.dropping() {
				// An original whose copy an earlier run confirmed: its ack,
				// which a lost connection did not carry (resume_acks.go).
				if meta := rn.s.ParseMeta(rn.r.DLQ, m); rn.dropsOriginal(meta) {
					return Pick{ID: meta.ID, Drop: true}, true
				}
			}
			if *left == 0 {
				return Pick{}, false
			}
			meta := rn.s.ParseMeta(rn.r.DLQ, m)
			id := meta.ID
			if pick[id] == 0 {
				// A later step's: a cursor keeps it for that step.
				return Pick{Later: !rn.resending && rn.plan.leftOf(id) > 0}, false
			}
			if rn.resending {
				e, ok := rn.rs.take(id, rn.r.ID)
				if !ok {
					return Pick{}, false
				}
				pick[id]--
				*left--
				rn.pacedTarget(e.Target)
				return Pick{ID: id, Target: e.Target, Source: meta.Source, Copy: e.Copy}, true
			}
			pick[id]--
			*left--
			rn.pacedTarget(rn.plan.target(id))
			return Pick{ID: id, Target: rn.plan.target(id), Source: meta.Source}, true
		},
		Satisfied: func() bool { return *left == 0 },
		Rewrite: func(h map[string]any, p Pick) map[string]any {
			out := letter.ReplayHeaders(h, rn.r.ID, p.Source, rn.s.cfg.Dialect.ResetHeaders()...)
			if rn.resending {
				out[PossibleDuplicateHeader] = true
			}
			return out
		},
		Window:   rn.s.cfg.Window,
		Rate:     rate,
		Pace:     paceHook,
		Continue: rn.mayContinue(ctx),
		Intend: func(ctx context.Context, batch []Moved) (map[string]string, error) {
			if err := rn.hb.check(ctx); err != nil {
				return nil, err
			}
			// A resend's window is fenced only: the first copy's intent is
			// still pending.
			return rn.s.d.Ledger.IntendWindow(ctx, rn.window(batch))
		},
		Confirmed: func(ctx context.Context, batch []Moved) error {
			if err := rn.s.d.Ledger.Confirm(ctx, rn.confirmations(batch)); err != nil {
				return err
			}
			rn.progress(ctx, len(batch))
			return nil
		},
	})
	rn.r.Sent = sentBefore
	rn.bookDrops(mr)
	rn.refused(mr, res)
	if rn.resending {
		rn.bookResend(mr, res, sentPer)
		return mr, rn.abandon(ctx, mr)
	}
	for _, moved := range [2][]Moved{mr.Sent, mr.Unacked} {
		for _, m := range moved {
			rn.stepSent[m.ID] = true
		}
	}
	for _, f := range mr.Failed {
		if !f.Kind.notSent() {
			rn.stepSent[f.ID] = true // maybe sent: another replay must not send it
		}
	}
	sent := 0
	for _, moved := range [2][]Moved{mr.Sent, mr.Unacked} {
		for _, m := range moved {
			rn.plan.drop(m.ID, 1)
			sentPer[m.Target]++
			sent++
		}
	}
	res.Sent += sent
	rn.r.Sent += sent
	rn.r.Duplicates += len(mr.Unacked)
	for _, f := range mr.Failed {
		rn.plan.drop(f.ID, 1)
		if f.Kind == MoveUnrecorded {
			// Confirmed by the broker, so delivered: its original stays in
			// the DLQ and its ledger intent stays pending (never sent
			// again). A duplicate, never "not delivered".
			res.Sent++
			rn.r.Sent++
			rn.r.Duplicates++
			sentPer[f.Target]++
			rn.fail(Failure{ID: f.ID, Target: f.Target, Kind: f.Kind.failure(), Detail: f.Detail})
			continue
		}
		res.Failed++
		if f.Kind == MoveLost {
			// No confirm: maybe delivered, maybe not. Not "not delivered".
			rn.r.InDoubt++
		} else {
			rn.r.Failed++
		}
		rn.fail(Failure{ID: f.ID, Target: f.Target, Kind: f.Kind.failure(), Detail: f.Detail})
	}
	if err := rn.abandon(ctx, mr); err != nil && moveErr == nil {
		moveErr = err
	}
	return mr, moveErr
}

// readyNow is the DLQ's ready count now (a passive declare); -1 when the
// broker cannot say.
func (rn *run) readyNow(ctx context.Context) int {
	st, err := rn.s.d.Broker.Inspect(ctx, rn.r.DLQ)
	if err != nil || !st.Exists {
		return -1
	}
	return st.Ready
}

// letGo reports whether what held messages of the DLQ after a step's last
// pass has let them go, so that reading again now may find its picks: a
// consumer seen since (holder) is gone, or more is ready than right after
// the pass (readyAt) with no consumer. It reads again rather than wait for
// statistics that may lag past the deadline on a loaded broker; only a
// quiet moment the statistics prove makes anything missing.
func (rn *run) letGo(ctx context.Context, holder *bool, readyAt int) bool {
	st, err := rn.s.d.Broker.Inspect(ctx, rn.r.DLQ)
	switch {
	case err != nil || !st.Exists:
		return false
	case st.Consumers > 0:
		*holder = true
		return false
	case *holder || readyAt >= 0 && st.Ready > readyAt:
		*holder = false
		return true
	}
	return false
}

// maxLetGoPasses bounds the reads a step looking for its picks makes
// because a consumer of the DLQ let go (findRest).
const maxLetGoPasses = 3

// findRest accounts for the picked messages the first pass did not find:
// it reads again once no other client holds messages of the DLQ, and calls
// missing only what a whole read between two quiet moments did not find.
// What it cannot account for within Config.HeldWait is held elsewhere:
// counted in res.HeldElsewhere and left in the plan.
func (rn *run) findRest(ctx context.Context, pick map[string]int, left *int, res *StepResult, sentPer map[string]int, mr MoveResult) (MoveResult, error) {
	deadline := rn.s.d.Clock.Now().Add(rn.s.cfg.HeldWait)
	passEnd := rn.s.d.Clock.Now()
	rn.flushProgress(ctx) // what the first pass sent, on record before the wait
	// Seeking: a settling replay whose cursor holds the picks gives them
	// back (readers.go).
	rn.markReading(ctx, true)
	defer rn.doneReading(ctx)
	// provenBefore: the broker reported no unacknowledged message on the
	// DLQ after the previous pass and before the last one began.
	provenBefore := false
	var passStart time.Time // when the last pass that may prove them missing began
	// holder: a consumer held messages of the DLQ after the last pass;
	// readyAt: the DLQ's ready count right after it (-1: unknown); letGos
	// counts the passes made because a holder let go (see letGo).
	holder, letGos := false, 0
	// repassed: a quiet moment led to a read again (see below).
	repassed := false
	readyAt := rn.readyNow(ctx)
	// The replays this search sees reading, named by heldBy if it gives up
	// after they ended; they mean nothing to a later step's heldBy.
	rn.sawReaders, rn.sawScans = nil, nil
	defer func() { rn.sawReaders, rn.sawScans = nil, nil }()
	for *left > 0 {
		// After a whole read, only the broker's unacked count can tell a
		// message held by a client without a consumer from a message gone.
		strict := mr.Coverage.Whole()
		// Wait in slices: between them, see whether the holder is another
		// dlqbot replay (see readerWait).
		slice := rn.s.d.Clock.Now().Add(rn.readerSlice())
		if slice.After(deadline) {
			slice = deadline
		}
		quiet, err := rn.s.awaitQuiet(ctx, rn.r.ID, rn.r.DLQ, passEnd, slice, strict, func() error { return rn.stopCause(ctx) })
		if err != nil {
			return mr, err
		}
		if stop := rn.stopCause(ctx); stop != nil {
			// Paused, cancelled or shut down while waiting: what is left
			// stays planned.
			*left = 0
			mr.Stopped = stop
			return mr, nil
		}
		if !quiet {
			again, ok := rn.readerWait(ctx, &deadline, passEnd)
			if !again && letGos < maxLetGoPasses && rn.letGo(ctx, &holder, readyAt) {
				again, ok, letGos = true, true, letGos+1
			}
			if !ok {
				break
			}
			if !again {
				continue
			}
			// Another replay's reader may have given them back by now:
			// read again (proves nothing about missing messages).
			provenBefore = false
			var moveErr error
			if mr, moveErr = rn.pass(ctx, pick, left, res, sentPer); moveErr != nil || mr.Stopped != nil {
				return mr, moveErr
			}
			passEnd, readyAt = rn.s.d.Clock.Now(), rn.readyNow(ctx)
			continue
		}
		if strict && provenBefore {
			// A whole read between two quiet moments did not find them:
			// missing, unless another dlqbot replay took them. While
			// another replay sends from the DLQ, no moment is quiet (a
			// quorum queue takes back its reads' give-backs late).
			if !rn.resending {
				*left -= rn.others(ctx, pick)
			}
			// A dlqbot read that held them during the pass and let them
			// go before the broker was looked at again shows in no count
			// of the broker's; its reading mark shows it (readers.go).
			if *left > 0 && (len(rn.liveReaders(ctx)) > 0 || rn.readDuring(ctx, passStart)) {
				provenBefore = false
				passEnd = rn.s.d.Clock.Now()
				deadline = passEnd.Add(rn.s.cfg.HeldWait)
				continue
			}
			rn.missing(pick, left, res)
			return mr, nil
		}
		if !strict && repassed {
			// A read again that was not whole either, with no consumer on
			// the DLQ: only the management API can say whether messages
			// given back are still landing or a client without a consumer
			// holds some. A run does not wait on an API that does not
			// answer (settle_api.go).
			if _, err := rn.counters(ctx, rn.r.DLQ); errors.Is(err, ErrManagementDown) {
				return mr, err
			}
		}
		provenBefore = strict
		passStart = rn.s.d.Clock.Now()
		repassed = true
		var moveErr error
		if mr, moveErr = rn.pass(ctx, pick, left, res, sentPer); moveErr != nil || mr.Stopped != nil {
			return mr, moveErr
		}
		passEnd, readyAt = rn.s.d.Clock.Now(), rn.readyNow(ctx)
		if !passEnd.Before(deadline) && !mr.Coverage.Whole() {
			// Quiet moments and reads that are never whole, past
			// HeldWait: held elsewhere, below.
			break
		}
	}
	if *left > 0 && !rn.resending {
		// Held by another replay's read, or already sent by it.
		*left -= rn.others(ctx, pick)
	}
	rn.heldNote = ""
	if *left > 0 {
		rn.heldNote = rn.heldBy(ctx)
		res.HeldElsewhere = *left
		held := *left
		*left = 0
		for id, n := range pick {
			if n > 0 {
				rn.fail(Failure{ID: id, Target: rn.plan.target(id), Kind: FailureHeldElsewhere,
					Detail: fmt.Sprintf("%d copy(ies) not found in %s while %s held messages of it; still planned", n, rn.r.DLQ, rn.heldNote)})
			}
		}
		res.Observation = fmt.Sprintf("%d planned message(s) could not be found in %s within %s because %s held messages of it unacked; they were not sent and stay planned",
			held, rn.r.DLQ, rn.s.cfg.HeldWait, rn.heldNote)
	}
	return mr, nil
}

// missing books what is left of pick as missing: gone from the DLQ.
func (rn *run) missing(pick map[string]int, left *int, res *StepResult) {
	if rn.resending {
		// The original of a copy in doubt is gone: it cannot be sent
		// again, and the first copy may have arrived. It stays in doubt.
		for _, e := range rn.rs.endStep(true) {
			res.Failed++
			rn.fail(Failure{ID: e.ID, Target: e.Target, Kind: FailureInDoubt,
				Detail: fmt.Sprintf("in doubt, and its original is no longer in %s (a whole read did not find it): it cannot be sent again", rn.r.DLQ)})
		}
		clear(pick)
		*left = 0
		return
	}
	for id, n := range pick {
		if n == 0 {
			continue
		}
		rn.plan.drop(id, n)
		rn.r.Missing += n
		res.Failed += n
		res.Missing += n
		rn.fail(Failure{ID: id, Target: rn.plan.target(id), Kind: FailureMissing,
			Detail: fmt.Sprintf("%d copy(ies) no longer in %s: a whole read of it, with no other client holding any message, did not find them", n, rn.r.DLQ)})
		pick[id] = 0
	}
	*left = 0
}

// awaitQuiet polls until no other client holds messages of dlq, as the
// broker reports it: no consumer (passive declare, exact) and, when
// strict, no unacknowledged message in a management sample that reflects
// a moment after since (its statistics lag by Config.StatsLag). It
// returns false when deadline passes first, or when stop (if set) says to
// stop. Without management statistics only the consumer count is known;
// a failed read of them counts as not quiet (logged for replay, when set),
// except that a strict wait for a replay ends at once with
// ErrManagementDown when the API is not answering.
func (s *Service) awaitQuiet(ctx context.Context, replay, dlq string, since, deadline time.Time, strict bool, stop func() error) (bool, error) {
	for {
		if stop != nil && stop() != nil {
			return false, nil
		}
		st, err := s.d.Broker.Inspect(ctx, dlq)
		if err != nil {
			return false, err
		}
		if !st.Exists {
			return false, fmt.Errorf("%s: %w", dlq, ErrQueueNotFound)
		}
		if st.Consumers == 0 {
			if !strict || s.d.Counters == nil {
				return true, nil
			}
			cs, err := s.d.Counters.Counters(ctx, dlq)
			if err != nil && replay != "" && errors.Is(err, ErrManagementDown) {
				// Only the API's counts prove that no client holds a
				// message: a run does not wait on an API that does not
				// answer (settle_api.go).
				return false, err
			}
			if err != nil {
				s.warn(replay, dlq, "read dlq counters", err)
			} else if !cs.SampledAt.IsZero() && cs.SampledAt.After(since.Add(s.cfg.StatsLag)) && cs.Unacked == 0 && cs.Consumers == 0 {
				return true, nil
			}
		}
		if s.d.Clock.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-s.d.Clock.After(s.cfg.SettlePoll):
		}
	}
}

// confirmations are the ledger entries a confirmed batch stands for: a
// resent copy confirms the pending intent of the copy in doubt it repeats.
func (rn *run) confirmations(batch []Moved) []LedgerEntry {
	out := rn.entries(batch, false)
	if !rn.resending {
		return out
	}
	for i, m := range batch {
		if e, ok := rn.rs.entry(m); ok {
			// The intent's own copy tag ("" for one written before copies
			// were named: the ledger then matches id, target and seq).
			out[i].Seq, out[i].Target, out[i].Copy = e.Seq, e.Target, e.Copy
		}
	}
	return out
}

// bookResend books a resend pass: a resent copy the broker confirmed is
// sent (once: its first copy never counted) and no longer in doubt, and a
// possible duplicate; one the broker did not confirm stays in doubt, its
// intent pending, and is never counted sent.
func (rn *run) bookResend(mr MoveResult, res *StepResult, sentPer map[string]int) {
	for _, m := range append(append([]Moved(nil), mr.Sent...), mr.Unacked...) {
		sentPer[m.Target]++
		res.Sent++
		rn.r.Sent++
		rn.r.Resent++
		rn.r.InDoubt = max(0, rn.r.InDoubt-1)
	}
	rn.r.Duplicates += len(mr.Unacked)
	for _, f := range mr.Failed {
		res.Failed++
		detail := "sent again, but " + f.Detail + "; still in doubt"
		if f.Kind == MoveUnrecorded {
			detail = "sent again and confirmed, but the ledger could not record it: " + f.Detail + "; still in doubt"
		}
		rn.fail(Failure{ID: f.ID, Target: f.Target, Kind: FailureInDoubt, Detail: detail})
	}
	if len(mr.Sent)+len(mr.Unacked) > 0 {
		rn.dropDoubtFailures(append(append([]Moved(nil), mr.Sent...), mr.Unacked...))
	}
}

// dropDoubtFailures removes the in-doubt failures of copies now sent.
func (rn *run) dropDoubtFailures(sent []Moved) {
	n := map[string]int{}
	for _, m := range sent {
		n[m.ID]++
	}
	kept := rn.r.Failures[:0]
	for _, f := range rn.r.Failures {
		if f.Kind == FailureInDoubt && n[f.ID] > 0 {
			n[f.ID]--
			continue
		}
		kept = append(kept, f)
	}
	rn.r.Failures = kept
}
