package replay

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/review"
)

// A step's move holds, unacknowledged, every message of the DLQ it passed
// over: a one-shot move until it ends, a cursor's until it is released.
// For a paced step that is the whole step, and what it passed includes the
// picks of another dlqbot replay of the same DLQ, which then waits for
// them (readerWait) as long as this step lasts. So a move gives way: every
// markEvery its Continue looks for another replay seeking messages of the
// DLQ (a step looking for its picks, findRest; a re-read that another read
// cut short, scanWhole; the reconcile and the acks' read after a lost
// connection) and, when there is one, stops publishing (errGiveWay). The
// pass then gives back everything the move held (the move's end, or the
// cursor's release), waits until the replays it gave way to have stopped
// seeking (giveWayFor: at most Config.Tune.HeldWait, the time a seeker waits
// for a holder, when the pass is paced; a seeker's read slice when it is
// not, since its next move holds their picks only for moments), and moves
// again for what is left of its picks, from the DLQ's head. The picks the
// stopped move had not published are withdrawn from the ledger (never
// published: certainly not sent) and picked again; what it published is
// confirmed and acked as on a pause. Claims are kept throughout, so no
// other replay sends them meanwhile.
//
// Two replays seeking at once would each give way to the other: a step
// that is itself looking for picks its read has not found yet gives way
// only to a seeker whose id sorts before its own, unless its pass is
// paced. A paced pass reads only as fast as it sends, so its search lasts
// as long as its sends, and it holds what it passed meanwhile: it gives
// way to every seeker, or an unpaced replay of the same DLQ would wait for
// its whole send. A seeking step marks itself a plain reader while it
// waits after giving way (it holds nothing then, and the replay it waits
// for must not wait for it in turn) and once its read has found all its
// picks (nobody need give way to, or wait for, a search that is over). A
// seeker still seeking when the wait ends was not waiting for this step's
// read: the step gives way to it no more until it stops seeking (deaf).

// errGiveWay stops a move's sends so that its read gives back what it
// holds to another dlqbot replay seeking messages of the DLQ.
var errGiveWay = errors.New("another dlqbot replay looks for messages this step's read holds")

// giveWayDue is called by a move's Continue: at most every markEvery it
// looks for replays seeking on the DLQ that this step gives way to, and
// reports whether there are any (kept in rn.yieldTo). left is what the
// pass has still to find.
func (ow *ownership) giveWayDue(ctx context.Context, left int) bool {
	now := ow.s.d.Clock.Now()
	if now.Sub(ow.yieldLooked) < review.MarkEvery {
		return false
	}
	ow.yieldLooked = now
	seekers, err := ow.s.d.Claims.Seekers(ctx, ow.dlq, ow.id)
	if err != nil {
		ow.s.base.Warn(ow.id, ow.dlq, "seekers", err)
		return false
	}
	for id := range ow.deaf {
		if !slices.Contains(seekers, id) {
			delete(ow.deaf, id) // its search ended: a new one is heard
		}
	}
	ow.yieldTo = ow.yieldTo[:0]
	for _, id := range seekers {
		if ow.deaf[id] || ow.seeking && left > 0 && id > ow.id && !ow.passPaced {
			continue
		}
		ow.yieldTo = append(ow.yieldTo, id)
	}
	return len(ow.yieldTo) > 0
}

// continueGivingWay is a pass's MoveRequest.Continue: mayContinue's,
// and errGiveWay when the step gives way (giveWayDue).
func (ow *ownership) continueGivingWay(ctx context.Context, left *int) func() error {
	may := ow.rn.jd.mayContinue(ctx)
	return func() error {
		if err := may(); err != nil {
			return err
		}
		if ow.seeking {
			ow.refreshSeek(ctx, *left > 0)
		}
		if ow.giveWayDue(ctx, *left) {
			return errGiveWay
		}
		return nil
	}
}

// refreshSeek keeps the mark of a step looking for its picks (findRest)
// while its pass sends: seeking while the pass has picks to find (want),
// a plain reader's once its read found them all, so that nobody gives way
// to, or waits for, a search that is over; refreshed every markEvery (a
// paced pass outlasts the mark's life). It is called from the move's
// Continue, on the run's goroutine: progress, on the mover's, refreshes
// only a cursor's mark, and a step looking for its picks has no cursor.
func (ow *ownership) refreshSeek(ctx context.Context, want bool) {
	if ow.markedSeeking != want || ow.s.d.Clock.Now().Sub(ow.marked) >= review.MarkEvery {
		ow.markReading(ctx, want)
	}
}

// moveGivingWay is rn.move choosing with choose, moved again after each
// give-way (see above) until the move ends for another reason. pick and
// left are the pass's: the picks a stopped move had not published go back
// into them. The result sums the moves; its Coverage and Stopped are the
// last one's.
func (ow *ownership) moveGivingWay(ctx context.Context, req engine.MoveRequest, choose metaPick, pick map[string]int, left *int) (engine.MoveResult, error) {
	var total engine.MoveResult
	for {
		mr, err := ow.rn.move(ctx, req, choose)
		gave := err == nil && errors.Is(mr.Stopped, errGiveWay)
		if gave {
			if aerr := ow.rn.abandon(ctx, engine.MoveResult{Unsent: mr.Unsent}); aerr != nil {
				// Their intents stand: not picked again by this step.
				mr.Stopped = nil
				return addMoves(total, mr), aerr
			}
			for _, m := range mr.Unsent {
				pick[m.ID]++
				*left++
			}
			mr.Unsent, mr.Stopped = nil, nil
		}
		total = addMoves(total, mr)
		if !gave || *left == 0 {
			return total, err
		}
		if stop := ow.giveWay(ctx); stop != nil {
			total.Stopped = stop
			return total, nil
		}
	}
}

// giveWay gives back what the step's read holds (the cursor's, when one
// is open: a one-shot move gave back at its end), waits for the replays
// in rn.yieldTo to stop seeking, and opens the cursor again if one was
// open. It returns a stop cause (pause, cancel, lost lease, shutdown)
// that came meanwhile.
func (ow *ownership) giveWay(ctx context.Context) error {
	to := slices.Clone(ow.yieldTo)
	why := "dlqbot " + strings.Join(to, ", ") + " looks for messages this step's read holds"
	hadCursor := ow.rn.cur != nil
	ow.rn.releaseCursor(why)
	if ow.seeking {
		ow.markReading(ctx, false)      // holding nothing while it waits (above)
		defer ow.markReading(ctx, true) // its pass has picks to find again
	}
	start := ow.s.d.Clock.Now()
	deadline := start.Add(ow.giveWayFor())
	for {
		if stop := ow.rn.stopCause(ctx); stop != nil {
			return stop
		}
		still := to
		if seekers, err := ow.s.d.Claims.Seekers(ctx, ow.dlq, ow.id); err == nil {
			still = slices.DeleteFunc(slices.Clone(to), func(id string) bool { return !slices.Contains(seekers, id) })
		}
		if len(still) == 0 {
			break
		}
		if !ow.s.d.Clock.Now().Before(deadline) {
			if ow.deaf == nil {
				ow.deaf = map[string]bool{}
			}
			for _, id := range still {
				ow.deaf[id] = true
			}
			break
		}
		select {
		case <-ctx.Done():
		case <-ow.s.d.Clock.After(ow.s.cfg.SettlePoll):
		}
	}
	ow.yieldLooked = ow.s.d.Clock.Now()
	ow.s.cfg.Log.Info().Str("replay_id", ow.id).Str("dlq", ow.dlq).Int("step", ow.rn.r.Step).
		Dur("waited", ow.s.d.Clock.Now().Sub(start)).Msg("gave way: " + why)
	if hadCursor {
		ow.rn.openCursor(ctx)
	}
	return nil
}

// addMoves is a and b summed: b's Coverage and Stopped stand.
func addMoves(a, b engine.MoveResult) engine.MoveResult {
	b.Read += a.Read
	b.SentN += a.SentN
	b.Sent = append(a.Sent, b.Sent...)
	b.Unacked = append(a.Unacked, b.Unacked...)
	b.Unsent = append(a.Unsent, b.Unsent...)
	b.Failed = append(a.Failed, b.Failed...)
	b.Refused = append(a.Refused, b.Refused...)
	b.Dropped = append(a.Dropped, b.Dropped...)
	return b
}

// giveWayFor is how long a step that gave way waits, at most, for the
// replays it gave way to to stop seeking: Config.Tune.HeldWait for a paced
// pass, whose next move would hold their picks again for as long as it
// sends; giveWayWait for an unpaced one, whose move holds them for
// moments, and a seeker still seeking after that is not waiting for it
// (its own pass sending paced, say).
func (ow *ownership) giveWayFor() time.Duration {
	if ow.passPaced {
		return ow.s.cfg.Tune.HeldWait
	}
	return ow.giveWayWait()
}

// giveWayWait is how long a run's re-read cut short by another dlqbot
// replay's read tries again at least (runScan): the other replay gives way
// within markEvery of the re-read's seeking mark, and its give-back lands
// within seconds.
func (ow *ownership) giveWayWait() time.Duration {
	return ow.readerSlice()
}
