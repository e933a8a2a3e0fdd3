package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// A step accounts for every message it planned. A pass over the DLQ that
// did not find some of them proves nothing by itself: another client may
// hold them unacked (a preview, another replica's read whose requeues a
// quorum queue has not applied yet), or the read may have been cut short.
// So a message is called missing only when a pass that saw the whole DLQ
// (Coverage.Whole), with the broker reporting no unacknowledged message on
// it before and after that pass, did not find it, no dlqbot read held
// messages of the DLQ meanwhile (reading marks), and the DLQ then holds no
// message the pass could not have seen (sawAll). Two samples around a
// pass say nothing of the moments between them: a client whose consumer
// is gone can hold the picks through the pass and give them back before
// the second sample (a reader of another replica draining its last
// deliveries, requeues that land late), and the pass then saw a whole DLQ
// without them. Until then the step waits for the other holder to let go
// and reads again, up to Config.Tune.HeldWait; what is still unaccounted for
// then is reported as held elsewhere and stays in the plan (the replay
// stops, resumable).

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
// missing only what a whole read between two quiet moments did not find,
// when the DLQ then holds nothing that read could not have seen (sawAll).
// What it cannot account for within Config.Tune.HeldWait is held elsewhere:
// counted in res.HeldElsewhere and left in the plan.
func (rn *run) findRest(ctx context.Context, pick map[string]int, left *int, res *engine.StepResult, sentPer map[string]int, mr engine.MoveResult) (engine.MoveResult, error) {
	f := rn.seek(ctx)
	defer rn.doneSeeking(ctx)
	// again reads the DLQ once more for what is left of pick.
	again := func() error {
		var err error
		if mr, err = rn.pass(ctx, pick, left, res, sentPer); err == nil && mr.Stopped == nil {
			f.passEnd, f.readyAt = rn.s.d.Clock.Now(), rn.readyNow(ctx)
		}
		return err
	}
look:
	for *left > 0 {
		// After a whole read, only the broker's unacked count can tell a
		// message held by a client without a consumer from a message gone.
		strict := mr.Coverage.Whole()
		quiet, err := rn.waitQuiet(ctx, &f, strict)
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
			read, ok := rn.noisy(ctx, &f)
			if !ok {
				break look
			}
			if !read {
				continue
			}
			f.provenBefore = false // a read that may find them back proves nothing missing
			if err := again(); err != nil || mr.Stopped != nil {
				return mr, err
			}
			continue
		}
		if strict && f.provenBefore {
			switch {
			case rn.proveMissing(ctx, pick, left, mr, &f):
				rn.missing(pick, left, res)
				return mr, nil
			case *left == 0 || !f.landed:
				// Another replay took them, or a dlqbot read may have
				// held them: the wait starts again.
				continue look
			case !rn.s.d.Clock.Now().Before(f.deadline):
				break look // past HeldWait: below
			}
			// Messages reached the DLQ that the read could not see: read
			// again, after this quiet moment.
		}
		if !strict && f.repassed {
			if err := rn.apiAnswers(ctx); err != nil {
				return mr, err
			}
		}
		f.provenBefore = strict
		f.passStart = rn.s.d.Clock.Now()
		f.repassed = true
		if err := again(); err != nil || mr.Stopped != nil {
			return mr, err
		}
		if !f.passEnd.Before(f.deadline) && !mr.Coverage.Whole() {
			// Quiet moments and reads that are never whole, past
			// HeldWait: held elsewhere, below.
			break look
		}
	}
	rn.unfound(ctx, pick, left, res, f.landed)
	return mr, nil
}

// seek starts findRest's search: what the first pass sent goes on record
// before the wait, and the run marks itself seeking, so that a settling
// replay whose cursor holds the picks gives them back (readers.go).
func (rn *run) seek(ctx context.Context) finder {
	f := finder{deadline: rn.s.d.Clock.Now().Add(rn.s.cfg.Tune.HeldWait), passEnd: rn.s.d.Clock.Now()}
	rn.flushProgress(ctx)
	rn.own.seeking = true
	rn.own.markReading(ctx, true)
	f.readyAt = rn.readyNow(ctx)
	// The replays this search sees reading, named by heldBy if it gives up
	// after they ended; they mean nothing to a later step's heldBy.
	rn.own.sawReaders, rn.own.sawScans = nil, nil
	return f
}

// doneSeeking ends what seek began.
func (rn *run) doneSeeking(ctx context.Context) {
	rn.own.seeking = false
	rn.own.doneReading(ctx)
	rn.own.sawReaders, rn.own.sawScans = nil, nil
}

// waitQuiet waits for a moment no other client holds messages of the DLQ
// (strict: after a whole read, see awaitQuiet), in slices, so that between
// them findRest sees whether the holder is another dlqbot replay
// (readerWait); a slice ends at f.deadline at the latest.
func (rn *run) waitQuiet(ctx context.Context, f *finder, strict bool) (bool, error) {
	slice := rn.s.d.Clock.Now().Add(rn.own.readerSlice())
	if slice.After(f.deadline) {
		slice = f.deadline
	}
	return rn.s.base.AwaitQuiet(ctx, rn.r.ID, rn.r.DLQ, f.passEnd, slice, strict, func() error { return rn.stopCause(ctx) })
}

// noisy decides what findRest does after a slice with no quiet moment:
// read again (read) because a dlqbot reader may have given the picks back
// (readerWait) or the holder let go (letGo), or wait on; ok is false
// once HeldWait has passed with no dlqbot reader seen.
func (rn *run) noisy(ctx context.Context, f *finder) (read, ok bool) {
	read, ok = rn.own.readerWait(ctx, &f.deadline, f.passEnd)
	if !read && f.letGos < maxLetGoPasses && rn.letGo(ctx, &f.holder, f.readyAt) {
		read, ok, f.letGos = true, true, f.letGos+1
	}
	return read, ok
}

// apiAnswers is ErrManagementDown when the management API does not answer,
// for a read again that was not whole either, with no consumer on the DLQ:
// only the API can say whether messages given back are still landing or a
// client without a consumer holds some. A run does not wait on an API that
// does not answer (settle_api.go).
func (rn *run) apiAnswers(ctx context.Context) error {
	if _, err := rn.jd.counters(ctx, rn.r.DLQ); errors.Is(err, engine.ErrManagementDown) {
		return err
	}
	return nil
}

// finder is what findRest knows between its reads of the DLQ.
type finder struct {
	// deadline is when it stops waiting (HeldWait, moved on while a
	// dlqbot reader holds messages of the DLQ: readerWait).
	deadline time.Time
	// passEnd is when the last pass ended, and passStart when the last
	// one that may prove picks missing began.
	passEnd, passStart time.Time
	// provenBefore: the broker reported no unacknowledged message on the
	// DLQ after the previous pass and before the last one began.
	provenBefore bool
	// holder: a consumer held messages of the DLQ after the last pass;
	// readyAt: the DLQ's ready count right after it (-1: unknown); letGos
	// counts the passes made because a holder let go (see letGo).
	holder  bool
	readyAt int
	letGos  int
	// repassed: a quiet moment led to a read again.
	repassed bool
	// landed: at the last quiet moment after a whole read, the DLQ held
	// messages that read could not have seen (sawAll), so its picks may
	// have been among them. When the search gives up after that, it says
	// so rather than name a holder: the wait that followed may merely not
	// have seen a statistics sample new enough to prove the next read.
	landed bool
}

// proveMissing decides, at a quiet moment after a whole read (mr) that
// followed another quiet moment, whether what is left of pick is missing.
// Another dlqbot replay may have taken some (others: out of pick). A
// dlqbot read that held them during the pass and let them go before the
// broker was looked at again shows in no count of the broker's, but its
// reading mark shows it (readers.go): then f.provenBefore is cleared and
// the wait starts again. And messages that reached the DLQ since the pass
// began, which it could not see (sawAll), may be the picks: f.landed is
// set, to read again.
func (rn *run) proveMissing(ctx context.Context, pick map[string]int, left *int, mr engine.MoveResult, f *finder) bool {
	f.landed = false
	if !rn.rec.resending {
		*left -= rn.own.others(ctx, pick)
	}
	if *left == 0 {
		return false
	}
	if len(rn.own.liveReaders(ctx)) > 0 || rn.own.readDuring(ctx, f.passStart) {
		f.provenBefore = false
		f.passEnd = rn.s.d.Clock.Now()
		f.deadline = f.passEnd.Add(rn.s.cfg.Tune.HeldWait)
		return false
	}
	if !rn.sawAll(ctx, mr) {
		f.landed = true
		return false
	}
	return true
}

// sawAll reports whether the DLQ now holds no message that the whole read
// mr could not have seen: no consumer is on it, and no more messages are
// ready than the read found ready when it began, less the originals it
// took out. More means messages reached the DLQ during or after the read:
// given back by a client that held them without a consumer (a reader of
// another replica between cancelling its consumer and giving its messages
// back, which no broker count shows), requeues that landed late, or new
// dead letters. A failed look proves nothing either.
func (rn *run) sawAll(ctx context.Context, mr engine.MoveResult) bool {
	st, err := rn.s.d.Broker.Inspect(ctx, rn.r.DLQ)
	if err != nil || !st.Exists || st.Consumers > 0 {
		return false
	}
	return st.Ready <= mr.Coverage.Ready-mr.SentN-len(mr.Dropped)
}

// unfound books what is left of pick, not found and not proven missing,
// as held elsewhere: counted in res.HeldElsewhere, left in the plan, and
// named (rn.heldNote) — who held messages of the DLQ, or, when messages
// kept reaching it that its whole reads had not seen (landed), that.
func (rn *run) unfound(ctx context.Context, pick map[string]int, left *int, res *engine.StepResult, landed bool) {
	if *left > 0 && !rn.rec.resending {
		// Held by another replay's read, or already sent by it.
		*left -= rn.own.others(ctx, pick)
	}
	rn.own.heldNote, rn.own.heldLanded = "", false
	if *left == 0 {
		return
	}
	rn.own.heldNote, rn.own.heldLanded = rn.own.heldBy(ctx), landed
	why := rn.own.heldNote + " held messages of it"
	if landed {
		why = "messages its whole reads had not seen kept reaching it (given back by " + rn.own.heldNote + ", or new dead letters)"
	}
	res.HeldElsewhere = *left
	held := *left
	*left = 0
	for id, n := range pick {
		if n > 0 {
			rn.fail(engine.Failure{ID: id, Target: rn.plan.Target(id), Kind: engine.FailureHeldElsewhere,
				Detail: fmt.Sprintf("%d copy(ies) not found in %s while %s; still planned", n, rn.r.DLQ, why)})
		}
	}
	if landed {
		res.Observation = fmt.Sprintf("%d planned message(s) were not found in %s, and for %s %s: they were not sent and stay planned",
			held, rn.r.DLQ, rn.s.cfg.Tune.HeldWait, why)
		return
	}
	res.Observation = fmt.Sprintf("%d planned message(s) could not be found in %s within %s because %s unacked; they were not sent and stay planned",
		held, rn.r.DLQ, rn.s.cfg.Tune.HeldWait, why)
}

// heldWhy is the replay's note for a step that left n planned messages
// held elsewhere (unfound).
func (rn *run) heldWhy(n int) string {
	if rn.own.heldLanded {
		return fmt.Sprintf("%d planned message(s) were not found in %s, and for longer than %s messages its whole reads had not seen kept reaching it (given back by %s, or new dead letters): not sent, still planned; resume to look again",
			n, rn.r.DLQ, rn.s.cfg.Tune.HeldWait, rn.own.heldNote)
	}
	return fmt.Sprintf("%d planned message(s) were held unacked by %s for longer than %s: not sent, still planned; resume when it lets go",
		n, rn.own.heldNote, rn.s.cfg.Tune.HeldWait)
}

// missing books what is left of pick as missing: gone from the DLQ.
func (rn *run) missing(pick map[string]int, left *int, res *engine.StepResult) {
	if rn.rec.resending {
		// The original of a copy in doubt is gone: it cannot be sent
		// again, and the first copy may have arrived. It stays in doubt.
		for _, e := range rn.rec.rs.endStep(true) {
			res.Failed++
			rn.fail(engine.Failure{ID: e.ID, Target: e.Target, Kind: engine.FailureInDoubt,
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
		rn.plan.Drop(id, n)
		rn.r.Missing += n
		res.Failed += n
		res.Missing += n
		rn.fail(engine.Failure{ID: id, Target: rn.plan.Target(id), Kind: engine.FailureMissing,
			Detail: fmt.Sprintf("%d copy(ies) no longer in %s: a whole read of it, with no other client holding any message, did not find them", n, rn.r.DLQ)})
		pick[id] = 0
	}
	*left = 0
}
