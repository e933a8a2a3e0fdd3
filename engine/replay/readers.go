package replay

import (
	"context"
	"github.com/stroma/dlqbot/engine/review"
	"strings"
)

// readMark is a reading mark as the run last wrote it: on until removed,
// seeking or not, and what the run's cursor held.
type readMark struct {
	on, seeking bool
	held        int
}

// markReading marks the run reading its DLQ (seeking: looking for picks)
// until a lease time from now.
func (rn *run) markReading(ctx context.Context, seeking bool) {
	if rn.s.d.Claims == nil {
		return
	}
	rn.marked, rn.markedSeeking = rn.s.d.Clock.Now(), seeking
	held := 0
	if rn.cur != nil {
		// What a preview beside it cannot see (heldByReplays), as of the
		// last step's end: Cursor.Held waits for a move in progress, and
		// a mark is refreshed from within one (progress).
		held = rn.curHeld
	}
	rn.markMu.Lock()
	defer rn.markMu.Unlock()
	rn.mark = readMark{on: true, seeking: seeking, held: held}
	if err := rn.s.d.Claims.Reading(ctx, rn.r.DLQ, rn.r.ID, seeking, held, rn.s.cfg.LeaseTTL); err != nil {
		rn.Warn("mark reading", err)
	}
}

// doneReading removes the run's mark, or turns a seeking mark back into a
// reader's while its cursor is open. A mark left by a run shutting down
// expires after the lease time (waiting on it is safe, and the drain on
// SIGTERM gets no longer).
func (rn *run) doneReading(ctx context.Context) {
	if rn.s.d.Claims == nil {
		return
	}
	if rn.cur != nil {
		rn.markReading(ctx, false)
		return
	}
	rn.markMu.Lock()
	defer rn.markMu.Unlock()
	rn.mark = readMark{}
	if ctx.Err() != nil {
		return // shutting down: the mark expires after the lease time
	}
	if err := rn.s.d.Claims.DoneReading(ctx, rn.r.DLQ, rn.r.ID); err != nil {
		rn.Warn("unmark reading", err)
	}
}

// keepMarked refreshes the run's mark as the run last wrote it (rn.mark),
// every markEvery from a goroutine of its own, until stop: for a read
// during which the run's own goroutine may not come back within the
// mark's life (a one-shot move calls the run back only when it
// publishes, and a read that passes many messages before its picks holds
// them all meanwhile). A mark the run removed is not refreshed.
func (rn *run) keepMarked(ctx context.Context) (stop func()) {
	if rn.s.d.Claims == nil {
		return func() {}
	}
	dlq, id, claims, ttl := rn.r.DLQ, rn.r.ID, rn.s.d.Claims, rn.s.cfg.LeaseTTL
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-mctx.Done():
				return
			case <-rn.s.d.Clock.After(review.MarkEvery):
			}
			rn.markMu.Lock()
			m := rn.mark
			var err error
			if m.on {
				err = claims.Reading(mctx, dlq, id, m.seeking, m.held, ttl)
			}
			rn.markMu.Unlock()
			if err != nil && mctx.Err() == nil {
				rn.s.cfg.Log.Warn().Err(err).Str("replay_id", id).Str("dlq", dlq).Msg("mark reading")
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
func (rn *run) yieldCursor(ctx context.Context) {
	if rn.cur == nil || rn.s.d.Claims == nil || rn.s.d.Clock.Now().Sub(rn.marked) < review.MarkEvery {
		return
	}
	seekers, err := rn.s.d.Claims.Seekers(ctx, rn.r.DLQ, rn.r.ID)
	if err != nil {
		rn.Warn("seekers", err)
	}
	if len(seekers) == 0 {
		rn.markReading(ctx, false)
		return
	}
	rn.releaseCursor("dlqbot " + strings.Join(seekers, ", ") + " looks for messages it may hold")
}

// scanReaderWords is who a whole read's reader id describes ("a preview of
// U123"), or "a dlqbot preview, approval or check" for an id without.
func scanReaderWords(id string) string {
	if _, who, ok := strings.Cut(id, " "); ok && who != "" {
		return who
	}
	return "a dlqbot preview, approval or check"
}
