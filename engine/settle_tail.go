package engine

import (
	"context"
	"errors"
	"time"
)

// A replay whose DLQ has no tap (it is fed through the default exchange)
// finds returns with its cursor instead of re-reading the DLQ at every
// step. The cursor sees every message of the DLQ once: those ready when it
// opened, through the steps' moves, and then everything that arrives
// behind them — copies that came back among it — through its tail
// consumer (TailCursor), holding all of it unacked until it is released.
// So a step's look for returns reads on to the DLQ's tail (what its moves
// have not reached yet, kept for later steps as they would be anyway) and
// then only what arrived since the last look.
//
// What the cursor saw is counted as a re-read counts the whole DLQ: a copy
// carrying this replay's id and a new death beyond the copies of its id
// seen before is a new return (rn.returnedSeen, shared with the re-reads,
// so a new cursor that meets returns counted by an earlier one counts none
// of them again). New failures are the messages without the replay's id
// that died since it was created and that the cursor saw.
//
// When the cursor cannot tell — another consumer on the DLQ, a read that
// ended short, a lost channel, a tail that does not come to rest within
// tailWait, or reading on would keep more than tailKeep planned messages
// in memory — the look falls back to re-reading the whole DLQ
// (rereadReturns), which says "could not tell" when it cannot either.
//
// The tail takes whatever becomes ready in the DLQ while it looks: beside
// returns and new dead letters, what another dlqbot replay of the same DLQ
// gives back — its picks, which it would then wait for. So the tail is
// never used while another dlqbot replay reads the DLQ (liveReaders: its
// claims or its reading mark): the look re-reads instead, marked and
// giving way as every run's re-read does (settle_scan.go). A replay that
// began reading during the look finds the cursor given back right after
// it (what the tail saw is counted first), and until then the run's
// reading mark names it, never "another client". And the look never makes
// anyone wait long: a tail that has not come to rest within tailWait is
// given back, and the look re-reads.

// TailCursor is a Cursor that keeps consuming what arrives at the DLQ
// behind the messages ready when it opened.
type TailCursor interface {
	Cursor
	// Arrivals calls visit with every message that arrived behind the
	// cursor's read and that no earlier call saw, and holds them until
	// Release (which gives them back after everything else). The read must
	// have ended (Done). It returns an error wrapping ErrHeldElsewhere
	// when it cannot have seen every arrival (another consumer on the
	// DLQ, a read that ended short); after any other error the cursor is
	// released.
	Arrivals(ctx context.Context, visit func(Message)) error
}

// tailKeep is the most planned copies a look may read past to reach the
// DLQ's tail: the cursor keeps them, bodies included, in memory for the
// steps that send them (some 100 MB of 1 KB messages). A plan with more
// left re-reads the DLQ for returns instead.
const tailKeep = 100000

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
	if _, ok := rn.cur.(TailCursor); !ok {
		return false
	}
	return rn.mode == ReturnsReread && rn.tail.on
}

// startTail begins what a cursor opened now sees.
func (rn *run) startTail() {
	rn.tail = curTail{on: rn.mode == ReturnsReread, seen: map[string]int{}, at: map[int]bool{}}
}

// observing wraps a move's Pick so that the cursor's look for returns sees
// every message the move reads.
func (rn *run) observing(pick func(Message) (Pick, bool)) func(Message) (Pick, bool) {
	return func(m Message) (Pick, bool) {
		rn.seeTail(m)
		return pick(m)
	}
}

// seeTail counts one message the cursor read: a return of this replay
// beyond the copies of its id counted before, or a new failure.
func (rn *run) seeTail(m Message) {
	if rn.tail.at[m.Seq] {
		return
	}
	rn.tail.at[m.Seq] = true
	meta := rn.s.viewMeta(rn.r.DLQ, m)
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
	tc, ok := rn.cur.(TailCursor)
	if !ok {
		return false
	}
	actx, cancel := context.WithTimeout(ctx, tailWait)
	err := tc.Arrivals(actx, rn.seeTail)
	cancel()
	if err != nil {
		if !errors.Is(err, ErrHeldElsewhere) {
			rn.cur = nil // released by the cursor
			rn.doneReading(ctx)
		}
		rn.warn("look at the DLQ's tail for returns", err)
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
	if rn.plan.remaining() > tailKeep {
		return false
	}
	mr, err := rn.move(ctx, MoveRequest{
		Queue: rn.r.DLQ,
		Pick: func(m Message) (Pick, bool) {
			return Pick{Later: !rn.resending && rn.plan.leftOf(rn.s.ParseMeta(rn.r.DLQ, m).ID) > 0}, false
		},
		Window: rn.s.cfg.Window,
	})
	if err != nil {
		rn.doneReading(ctx) // the cursor was released
		rn.warn("read on to the DLQ's tail for returns", err)
		return false
	}
	return mr.Coverage.Whole() && rn.cur != nil && rn.cur.Done()
}
