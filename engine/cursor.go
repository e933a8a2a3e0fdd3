package engine

import (
	"context"
	"fmt"
	"time"
)

// A replay reads its DLQ once, not once per step. Its steps pick in DLQ
// order (plan.next), so one read, a Cursor, serves them all: each step's
// move continues from where the last one stopped, and what the read passed
// without taking stays held unacknowledged by it — invisible to other
// reads, in its place in the DLQ — instead of being given back and read
// again by the next step. The cursor gives everything it holds back, in
// order, when it is bounded:
//
//   - it holds more than Config.CursorHold messages (by default the
//     larger of DefaultCursorHold and the preview's depth, see holdBound);
//   - it has been open for Config.CursorAge (half of RabbitMQ's default
//     consumer_timeout of 30 minutes, past which the broker closes a
//     channel holding an unacknowledged delivery), or the next settle
//     could take it past that;
//   - its read ended and no message it holds is wanted any more;
//   - a step did not find all its picks (they are then looked for by the
//     one-shot reads of account_find.go, which must not take dlqbot's own
//     cursor for another client holding messages);
//   - a resend of copies in doubt, which reads the DLQ afresh;
//   - another dlqbot replay seeks messages of the DLQ, during a step's
//     sends too (giveway.go: the step opens a new cursor once it has);
//   - a pause, a stop, a cancel, a lost lease, a shutdown or the end.
//
// A paused or stopped replay therefore holds nothing. The next step after
// a release opens a new cursor at the head of the DLQ. A replay without a
// tap (ReturnsReread) finds returns with its cursor too (settle_tail.go):
// its cursor is not released when its read ends, since it goes on seeing
// what arrives at the DLQ's tail. When the cursor cannot tell, the run
// releases it before it re-reads the DLQ, whose read would otherwise wait
// for the cursor's consumer and could not see what it holds. And a step
// of such a replay that begins while another dlqbot replay reads the DLQ
// reads without a cursor (rn.beside): its returns are then found by
// re-reading the DLQ (the tail would take what the other replay gives
// back), and a cursor would only hold, between those re-reads and the
// other replay's, what both must see whole.

// Cursor defaults.
const (
	// DefaultCursorHold is the least of Config.CursorHold's default (see
	// holdBound).
	DefaultCursorHold = 250000
	// DefaultCursorAge is the default of Config.CursorAge: half of
	// RabbitMQ's default consumer_timeout (30 minutes).
	DefaultCursorAge = 15 * time.Minute
)

// cursorRefillWait bounds how long a step's bypass check waits for the
// broker to refill the cursor's window after the step's acks (see
// checkBypass) before it takes the DLQ's growth for a bypass.
const cursorRefillWait = 10 * time.Second

// cursorMover is the mover's cursor support, if the run may use it now.
func (rn *run) cursorMover() (CursorMover, bool) {
	cm, ok := rn.s.d.Mover.(CursorMover)
	if !ok || rn.s.cfg.CursorHold < 0 || rn.resending || rn.mode == ReturnsReread && rn.beside {
		return nil, false
	}
	return cm, true
}

// openCursor opens the run's cursor on the DLQ unless one is open or the
// run reads without one. A cursor that cannot be opened is no error: the
// step reads the DLQ once as before, and reports what that read finds.
func (rn *run) openCursor(ctx context.Context) {
	cm, ok := rn.cursorMover()
	if !ok {
		// Resending (its reads must find the DLQ whole), or a step
		// without a tap beside another replay (rn.beside, above).
		rn.releaseCursor("the step reads without a cursor")
		return
	}
	if rn.cur != nil && rn.mode == ReturnsReread && !rn.tail.on {
		// Opened while the tap found returns (it has since missed some):
		// what the cursor read before was not looked at for returns.
		rn.releaseCursor("returns are looked for with the cursor from now on")
	}
	if rn.cur != nil {
		return
	}
	c, err := cm.OpenCursor(ctx, rn.r.DLQ)
	if err != nil {
		rn.warn("open cursor", err)
		return
	}
	rn.cur, rn.curOpened = c, rn.s.d.Clock.Now()
	// What the cursor reads is looked at for returns (settle_tail.go).
	rn.startTail()
	rn.markReading(ctx, false) // readers.go
	rn.s.cfg.Log.Info().Str("replay_id", rn.r.ID).Str("dlq", rn.r.DLQ).Int("step", rn.r.Step).Msg("cursor opened")
}

// move is one move of a step: from the cursor when one is open, else a
// one-shot read of the DLQ. A cursor whose move failed is released (by
// the cursor) and dropped.
func (rn *run) move(ctx context.Context, req MoveRequest) (MoveResult, error) {
	if rn.cur == nil {
		return rn.s.d.Mover.Move(ctx, req)
	}
	if rn.tailing() {
		req.Pick = rn.observing(req.Pick) // settle_tail.go
	}
	mr, err := rn.cur.Move(ctx, req)
	if err != nil {
		rn.cur = nil
	}
	return mr, err
}

// boundCursor releases the cursor when it holds too much, is too old (or
// would be by the end of the step's settle), its read ended with nothing
// it holds still wanted (unless it finds the run's returns at the DLQ's
// tail), or another dlqbot replay sends from the same DLQ
// (whose picks the cursor may hold: it gets them between this run's
// steps, as without a cursor).
func (rn *run) boundCursor(ctx context.Context) {
	if rn.cur == nil {
		return
	}
	age := rn.s.d.Clock.Now().Sub(rn.curOpened)
	switch {
	case rn.replaysReading(ctx):
		rn.releaseCursor("another dlqbot replay sends from the DLQ")
	case rn.cur.Held() > holdBound(rn.s.cfg.CursorHold, rn.plan.reach):
		rn.releaseCursor(fmt.Sprintf("it holds more than %d messages", holdBound(rn.s.cfg.CursorHold, rn.plan.reach)))
	case age+rn.r.Params.Timeout > rn.s.cfg.CursorAge:
		rn.releaseCursor(fmt.Sprintf("it would be open longer than %s", rn.s.cfg.CursorAge))
	case rn.cur.Done() && !rn.wantsHeld() && !rn.tailing():
		rn.releaseCursor("its read ended")
	default:
		rn.curHeld = rn.cur.Held() // no move is in progress
		rn.markReading(ctx, false) // with what it holds now (readers.go)
	}
}

// holdBound is the most messages a cursor may hold: hold when it is set
// (Config.CursorHold > 0), else the larger of DefaultCursorHold and reach,
// how deep the replay's preview read (one past its last previewed
// message). The preview held every message it read until its read ended,
// so a cursor within reach holds no more than the broker already held for
// it; a smaller bound would make a sparse selection's later steps release
// and re-read the DLQ from its head, each one as deep as the bound (10% of
// 1,000,000 passes 900,000 messages it does not take).
func holdBound(hold, reach int) int {
	if hold > 0 {
		return hold
	}
	return max(DefaultCursorHold, reach)
}

// wantsHeld reports whether the plan still has copies a read may already
// have passed: planned copies of items before the furthest one sent.
func (rn *run) wantsHeld() bool {
	return rn.plan.remaining() > 0
}

// releaseCursor gives back everything the cursor holds (why says why, for
// the log) and drops it.
func (rn *run) releaseCursor(why string) {
	if rn.cur == nil {
		return
	}
	c := rn.cur
	rn.cur = nil
	held := c.Held()
	n, err := c.Release()
	if err != nil {
		rn.warn("release cursor ("+why+")", err)
	}
	rn.doneReading(context.Background())
	rn.s.cfg.Log.Info().Str("replay_id", rn.r.ID).Str("dlq", rn.r.DLQ).Int("step", rn.r.Step).
		Int("held", held).Int("given_back", n).Msg("cursor released: " + why)
}

// cursorHeld is how many messages the run's cursor holds (0: none open).
func (rn *run) cursorHeld() int {
	if rn.cur == nil {
		return 0
	}
	return rn.cur.Held()
}
