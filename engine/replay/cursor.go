package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
)

// cursorRefillWait bounds how long a step's bypass check waits for the
// broker to refill the cursor's window after the step's acks (see
// checkBypass) before it takes the DLQ's growth for a bypass.
const cursorRefillWait = 10 * time.Second

// cursorMover is the mover's cursor support, if the run may use it now.
func (rn *run) cursorMover() (engine.CursorMover, bool) {
	cm, ok := rn.s.d.Mover.(engine.CursorMover)
	if !ok || rn.s.cfg.Tune.CursorHold < 0 || rn.rec.resending || rn.ret.mode == engine.ReturnsReread && rn.beside {
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
		rn.s.rev.DropKept(rn.r.ID)
		return
	}
	if rn.cur != nil && rn.ret.mode == engine.ReturnsReread && !rn.ret.tail.on {
		// Opened while the tap found returns (it has since missed some):
		// what the cursor read before was not looked at for returns.
		rn.releaseCursor("returns are looked for with the cursor from now on")
	}
	if rn.cur != nil {
		return
	}
	c, how := rn.keptCursor()
	if c == nil {
		var err error
		if c, err = cm.OpenCursor(ctx, rn.r.DLQ); err != nil {
			rn.Warn("open cursor", err)
			return
		}
	}
	rn.cur, rn.curOpened = c, rn.s.d.Clock.Now()
	// What the cursor reads is looked at for returns (settle_tail.go).
	rn.ret.startTail()
	rn.own.markReading(ctx, false) // readers.go
	rn.s.cfg.Log.Info().Str("replay_id", rn.r.ID).Str("dlq", rn.r.DLQ).Int("step", rn.r.Step).Msg("cursor opened" + how)
}

// keptCursor takes over, as the run's cursor, the read its approval kept
// (engine.ReadKeeper): the approval compared the DLQ with the preview by
// reading it whole, and the cursor begins where that read ended instead of
// reading the DLQ again. Only the run's first cursor can: once a step was
// sent (or a run ended) the read is stale, and resends and later cursors
// read afresh. nil when there is none; how says where the cursor came
// from, for the log.
func (rn *run) keptCursor() (c engine.Cursor, how string) {
	k, ok := rn.s.d.Mover.(engine.ReadKeeper)
	if !ok || rn.r.Step > 1 || rn.r.Sent > 0 {
		// Kept by the approval's Broker, which is not this Mover (only
		// tests tell them apart), or stale: given back before the
		// cursor's read, which would find the DLQ held.
		rn.s.rev.DropKept(rn.r.ID)
		return nil, ""
	}
	if c, ok = k.TakeKept(rn.r.ID, rn.r.DLQ); !ok {
		return nil, ""
	}
	return c, " from the approval's read"
}

// metaPick chooses what a move does with a message (engine.MoveRequest's
// Pick); meta returns the message's metadata, parsed at most once however
// often it is asked.
type metaPick func(m engine.Message, meta func() letter.Meta) (engine.Pick, bool)

// move is one move of a step, choosing with pick: from the cursor when one
// is open, else a one-shot read of the DLQ. A cursor's look for returns
// (settle_tail.go) sees every message the move reads, with the metadata
// the pick reads: each message is parsed once. A cursor whose move failed
// is released (by the cursor) and dropped.
func (rn *run) move(ctx context.Context, req engine.MoveRequest, pick metaPick) (engine.MoveResult, error) {
	observe := rn.cur != nil && rn.ret.tailing()
	var (
		cur    engine.Message
		meta   letter.Meta
		parsed bool
	)
	metaOf := func() letter.Meta {
		if !parsed {
			meta, parsed = rn.s.base.ParseMeta(rn.r.DLQ, cur), true
		}
		return meta
	}
	req.Pick = func(m engine.Message) (engine.Pick, bool) {
		cur, parsed = m, false
		if observe {
			rn.ret.seeTail(m, metaOf())
		}
		return pick(m, metaOf)
	}
	if rn.cur == nil {
		return rn.s.d.Mover.Move(ctx, req)
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
	case rn.own.replaysReading(ctx):
		rn.releaseCursor("another dlqbot replay sends from the DLQ")
	case rn.cur.Held() > engine.HoldBound(rn.s.cfg.Tune.CursorHold, rn.plan.Reach):
		rn.releaseCursor(fmt.Sprintf("it holds more than %d messages", engine.HoldBound(rn.s.cfg.Tune.CursorHold, rn.plan.Reach)))
	case age+rn.r.Params.Timeout > rn.s.cfg.Tune.CursorAge:
		rn.releaseCursor(fmt.Sprintf("it would be open longer than %s", rn.s.cfg.Tune.CursorAge))
	case rn.cur.Done() && !rn.wantsHeld() && !rn.ret.tailing():
		rn.releaseCursor("its read ended")
	default:
		rn.own.curHeld = rn.cur.Held() // no move is in progress
		rn.own.markReading(ctx, false) // with what it holds now (readers.go)
	}
}

// wantsHeld reports whether the plan still has copies a read may already
// have passed: planned copies of items before the furthest one sent.
func (rn *run) wantsHeld() bool {
	return rn.plan.Remaining() > 0
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
		rn.Warn("release cursor ("+why+")", err)
	}
	rn.own.doneReading(context.Background())
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
