package replay

import (
	"context"
	"errors"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
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
func (rf *returnsFinder) tailing() bool {
	if _, ok := rf.rn.cur.(engine.TailCursor); !ok {
		return false
	}
	return rf.mode == engine.ReturnsReread && rf.tail.on
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
func (rf *returnsFinder) tailReads(ctx context.Context) bool {
	if rf.dlqType == "" {
		// A queue's type never changes: asked once it is told, not at
		// every step.
		if st, err := rf.s.d.Broker.Inspect(ctx, rf.dlq); err == nil && st.Exists {
			rf.dlqType = st.Type
		}
	}
	return rf.dlqType == "classic"
}

// startTail begins what a cursor opened now sees.
func (rf *returnsFinder) startTail() {
	rf.tail = curTail{on: rf.mode == engine.ReturnsReread, seen: map[string]int{}, at: map[int]bool{}}
}

// seeTail counts one message the cursor read, whose metadata is meta
// (ParseMeta): a return of this replay beyond the copies of its id
// counted before, or a new failure. Only counted messages keep their
// position, so that none is counted twice.
func (rf *returnsFinder) seeTail(m engine.Message, meta letter.Meta) {
	if rf.tail.at[m.Seq] {
		return
	}
	switch {
	case meta.ReplayID == rf.id && meta.Returned:
		rf.tail.at[m.Seq] = true
		rf.tail.seen[meta.ID]++
		if n := rf.tail.seen[meta.ID]; n > rf.returnedSeen[meta.ID] {
			rf.returnedSeen[meta.ID] = n
			rf.rn.r.Returned++
			rf.rn.fail(returnedFailure(rf.s.base.Viewed(rf.dlq, m, meta)))
		}
	case meta.ReplayID != rf.id && rf.rn.jd.isNew(meta):
		rf.tail.at[m.Seq] = true
		rf.tail.fresh++
	}
}

// seeArrival is seeTail for a message that arrived behind the cursor.
func (rf *returnsFinder) seeArrival(m engine.Message) {
	rf.seeTail(m, rf.s.base.ParseMeta(rf.dlq, m))
}

// cursorReturns looks for returns with the run's cursor: it reads on to
// the DLQ's tail when the steps' moves have not reached it yet, then takes
// what arrived since the last look. It reports false when the cursor
// could not tell, or another dlqbot replay reads the DLQ (the caller then
// re-reads the DLQ).
func (rf *returnsFinder) cursorReturns(ctx context.Context) bool {
	if !rf.tailing() || rf.rn.own.replaysReading(ctx) {
		return false
	}
	if !rf.rn.cur.Done() && !rf.readOnToTail(ctx) {
		return false
	}
	tc, ok := rf.rn.cur.(engine.TailCursor)
	if !ok {
		return false
	}
	actx, cancel := context.WithTimeout(ctx, tailWait)
	err := tc.Arrivals(actx, rf.seeArrival)
	cancel()
	if err != nil {
		if !errors.Is(err, engine.ErrHeldElsewhere) {
			rf.rn.cur = nil // released by the cursor
			rf.rn.own.doneReading(ctx)
		}
		rf.s.base.Warn(rf.id, rf.dlq, "look at the DLQ's tail for returns", err)
		return false
	}
	rf.rn.r.NewFailures = rf.tail.fresh
	if rf.rn.own.replaysReading(ctx) {
		// Began reading during the look: what it gave back meanwhile may
		// be among what the tail took.
		rf.rn.releaseCursor("another dlqbot replay reads the DLQ")
	}
	return true
}

// readOnToTail continues the cursor's read to the DLQ's tail, keeping the
// planned messages it passes for the steps that send them; it reports
// whether the read reached the tail, having seen the whole DLQ.
func (rf *returnsFinder) readOnToTail(ctx context.Context) bool {
	if rf.rn.plan.Remaining() > engine.TailKeep {
		return false
	}
	mr, err := rf.rn.move(ctx, engine.MoveRequest{Queue: rf.dlq, Window: rf.s.cfg.Tune.Window},
		func(_ engine.Message, meta func() letter.Meta) (engine.Pick, bool) {
			return engine.Pick{Later: !rf.rn.rec.resending && rf.rn.plan.LeftOf(meta().ID) > 0}, false
		})
	if err != nil {
		rf.rn.own.doneReading(ctx) // the cursor was released
		rf.s.base.Warn(rf.id, rf.dlq, "read on to the DLQ's tail for returns", err)
		return false
	}
	return mr.Coverage.Whole() && rf.rn.cur != nil && rf.rn.cur.Done()
}
