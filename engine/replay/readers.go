package replay

import (
	"context"
	"strings"

	"github.com/stroma/dlqbot/engine/review"
)

// readMark is a reading mark as the run last wrote it: on until removed,
// seeking or not, and what the run's cursor held.
type readMark struct {
	on, seeking bool
	held        int
}

// markReading marks the run reading its DLQ (seeking: looking for picks)
// until a lease time from now.
func (ow *ownership) markReading(ctx context.Context, seeking bool) {
	ow.marked, ow.markedSeeking = ow.s.d.Clock.Now(), seeking
	held := 0
	if ow.rn.cur != nil {
		// What a preview beside it cannot see (heldByReplays), as of the
		// last step's end: Cursor.Held waits for a move in progress, and
		// a mark is refreshed from within one (progress).
		held = ow.curHeld
	}
	ow.markMu.Lock()
	defer ow.markMu.Unlock()
	ow.mark = readMark{on: true, seeking: seeking, held: held}
	if err := ow.s.d.Claims.Reading(ctx, ow.dlq, ow.id, seeking, held, ow.s.cfg.LeaseTTL); err != nil {
		ow.s.base.Warn(ow.id, ow.dlq, "mark reading", err)
	}
}

// doneReading removes the run's mark, or turns a seeking mark back into a
// reader's while its cursor is open. A mark left by a run shutting down
// expires after the lease time (waiting on it is safe, and the drain on
// SIGTERM gets no longer).
func (ow *ownership) doneReading(ctx context.Context) {
	if ow.rn.cur != nil {
		ow.markReading(ctx, false)
		return
	}
	ow.markMu.Lock()
	defer ow.markMu.Unlock()
	ow.mark = readMark{}
	if ctx.Err() != nil {
		return // shutting down: the mark expires after the lease time
	}
	if err := ow.s.d.Claims.DoneReading(ctx, ow.dlq, ow.id); err != nil {
		ow.s.base.Warn(ow.id, ow.dlq, "unmark reading", err)
	}
}

// keepMarked refreshes the run's mark as the run last wrote it (mark),
// every markEvery from a goroutine of its own, until stop: for a read
// during which the run's own goroutine may not come back within the
// mark's life (a one-shot move calls the run back only when it
// publishes, and a read that passes many messages before its picks holds
// them all meanwhile). A mark the run removed is not refreshed.
func (ow *ownership) keepMarked(ctx context.Context) (stop func()) {
	dlq, id, claims, ttl := ow.dlq, ow.id, ow.s.d.Claims, ow.s.cfg.LeaseTTL
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-mctx.Done():
				return
			case <-ow.s.d.Clock.After(review.MarkEvery):
			}
			ow.markMu.Lock()
			m := ow.mark
			var err error
			if m.on {
				err = claims.Reading(mctx, dlq, id, m.seeking, m.held, ttl)
			}
			ow.markMu.Unlock()
			if err != nil && mctx.Err() == nil {
				ow.s.base.Warn(id, dlq, "mark reading", err)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// yieldCursor is called by a settling step: every markEvery while the
// run's cursor is open, it refreshes the run's mark, and releases the
// cursor when another replay seeks picks on the DLQ (the bypass check
// allows for what the cursor held being ready again: see bypassBase).
func (ow *ownership) yieldCursor(ctx context.Context) {
	if ow.rn.cur == nil || ow.s.d.Clock.Now().Sub(ow.marked) < review.MarkEvery {
		return
	}
	seekers, err := ow.s.d.Claims.Seekers(ctx, ow.dlq, ow.id)
	if err != nil {
		ow.s.base.Warn(ow.id, ow.dlq, "seekers", err)
	}
	if len(seekers) == 0 {
		ow.markReading(ctx, false)
		return
	}
	ow.rn.releaseCursor("dlqbot " + strings.Join(seekers, ", ") + " looks for messages it may hold")
}

// scanReaderWords is who a whole read's reader id describes ("a preview of
// U123"), or "a dlqbot preview, approval or check" for an id without.
func scanReaderWords(id string) string {
	if _, who, ok := strings.Cut(id, " "); ok && who != "" {
		return who
	}
	return "a dlqbot preview, approval or check"
}
