package replay

import (
	"context"
	"errors"
	"github.com/stroma/dlqbot/engine"
	"time"
)

// tailWait bounds one look at the cursor's tail (TailCursor.Arrivals): it
// takes moments when the DLQ comes to rest (nothing ready that the tail
// has not taken), and holds what it takes meanwhile.
const tailWait = 5 * time.Second

// curTail is what the run's cursor has seen of the replay's returns since
// it opened.
type curTail struct {
	// on is set when the cursor was opened by a run that finds returns
	// with it (ReturnsReread): every message it read was looked at.
	on bool
	// seen are the returned copies of this replay the cursor read, id →
	// copies, and at their DLQ positions (a message a later step wants is
	// offered to every move until it is sent).
	seen map[string]int
	at   map[int]bool
	// fresh is how many new failures the cursor read.
	fresh int
}

// tailing reports whether the run's look for returns uses its cursor.
func (rn *run) tailing() bool {
	if _, ok := rn.cur.(engine.TailCursor); !ok {
		return false
	}
	return rn.mode == engine.ReturnsReread && rn.tail.on
}

// tailReads says whether the run, having no tap, may find returns at its
// cursor's tail: only on a classic DLQ, whose reads cost its messages
// nothing. A cursor gives everything it holds back when it is released
// (a lost connection, a give-way, a pause), and on a quorum DLQ before
// RabbitMQ 4.3 each give-back spends a delivery attempt of every message
// it held, which the read budget (engine/budget.go) does not count for a
// cursor. So a replay of a quorum DLQ without a tap (or of a DLQ whose
// type cannot be told) reads without a cursor and re-reads for its
// returns, as the budget counts them.
func (rn *run) tailReads(ctx context.Context) bool {
	if rn.dlqType == "" {
		// A queue's type never changes: asked once it is told, not at
		// every step.
		if st, err := rn.s.d.Broker.Inspect(ctx, rn.r.DLQ); err == nil && st.Exists {
			rn.dlqType = st.Type
		}
	}
	return rn.dlqType == "classic"
}

// startTail begins what a cursor opened now sees.
func (rn *run) startTail() {
	rn.tail = curTail{on: rn.mode == engine.ReturnsReread, seen: map[string]int{}, at: map[int]bool{}}
}

// observing wraps a move's Pick so that the cursor's look for returns sees
// every message the move reads.
func (rn *run) observing(pick func(engine.Message) (engine.Pick, bool)) func(engine.Message) (engine.Pick, bool) {
	return func(m engine.Message) (engine.Pick, bool) {
		rn.seeTail(m)
		return pick(m)
	}
}

// seeTail counts one message the cursor read: a return of this replay
// beyond the copies of its id counted before, or a new failure.
func (rn *run) seeTail(m engine.Message) {
	if rn.tail.at[m.Seq] {
		return
	}
	rn.tail.at[m.Seq] = true
	meta := rn.s.base.ViewMeta(rn.r.DLQ, m)
	switch {
	case meta.ReplayID == rn.r.ID && meta.Returned:
		rn.tail.seen[meta.ID]++
		if n := rn.tail.seen[meta.ID]; n > rn.returnedSeen[meta.ID] {
			rn.returnedSeen[meta.ID] = n
			rn.r.Returned++
			rn.fail(returnedFailure(meta))
		}
	case meta.ReplayID != rn.r.ID && rn.isNew(meta):
		rn.tail.fresh++
	default:
		delete(rn.tail.at, m.Seq) // only counted messages need their position
	}
}

// cursorReturns looks for returns with the run's cursor: it reads on to
// the DLQ's tail when the steps' moves have not reached it yet, then takes
// what arrived since the last look. It reports false when the cursor
// could not tell, or another dlqbot replay reads the DLQ (the caller then
// re-reads the DLQ).
func (rn *run) cursorReturns(ctx context.Context) bool {
	if !rn.tailing() || rn.replaysReading(ctx) {
		return false
	}
	if !rn.cur.Done() && !rn.readOnToTail(ctx) {
		return false
	}
	tc, ok := rn.cur.(engine.TailCursor)
	if !ok {
		return false
	}
	actx, cancel := context.WithTimeout(ctx, tailWait)
	err := tc.Arrivals(actx, rn.seeTail)
	cancel()
	if err != nil {
		if !errors.Is(err, engine.ErrHeldElsewhere) {
			rn.cur = nil // released by the cursor
			rn.doneReading(ctx)
		}
		rn.Warn("look at the DLQ's tail for returns", err)
		return false
	}
	rn.r.NewFailures = rn.tail.fresh
	if rn.replaysReading(ctx) {
		// Began reading during the look: what it gave back meanwhile may
		// be among what the tail took.
		rn.releaseCursor("another dlqbot replay reads the DLQ")
	}
	return true
}

// readOnToTail continues the cursor's read to the DLQ's tail, keeping the
// planned messages it passes for the steps that send them; it reports
// whether the read reached the tail, having seen the whole DLQ.
func (rn *run) readOnToTail(ctx context.Context) bool {
	if rn.plan.Remaining() > engine.TailKeep {
		return false
	}
	mr, err := rn.move(ctx, engine.MoveRequest{
		Queue: rn.r.DLQ,
		Pick: func(m engine.Message) (engine.Pick, bool) {
			return engine.Pick{Later: !rn.resending && rn.plan.LeftOf(rn.s.base.ParseMeta(rn.r.DLQ, m).ID) > 0}, false
		},
		Window: rn.s.cfg.Window,
	})
	if err != nil {
		rn.doneReading(ctx) // the cursor was released
		rn.Warn("read on to the DLQ's tail for returns", err)
		return false
	}
	return mr.Coverage.Whole() && rn.cur != nil && rn.cur.Done()
}
