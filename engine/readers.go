package engine

import (
	"context"
	"strings"
	"time"
)

// Two replays of one DLQ read it at once, and each read holds what it
// passed unacknowledged, invisible to the other (cursor.go). So that one
// replay never takes the other's read for "another client" holding its
// picks, and never waits on it for long, each marks itself in the store
// (Claims.Reading) while a read of its holds messages:
//
//   - a cursor open between steps marks the replay a reader, refreshed
//     while it settles; a replay looking for picks it did not find waits
//     for such a reader as for one with claims (readerWait), never
//     calling its picks held by another client;
//   - a step that did not find all its picks (findRest) marks the replay
//     seeking; a settling replay whose cursor is open looks for seekers
//     every markEvery and gives back what its cursor holds when there is
//     one, so the seeker's next read finds its picks.
//
// Marks expire after the lease time, so a replay that died leaves none
// for long.

// markEvery is how often a settling replay with an open cursor refreshes
// its mark and looks for seekers.
const markEvery = 2 * time.Second

// markReading marks the run reading its DLQ (seeking: looking for picks)
// until a lease time from now.
func (rn *run) markReading(ctx context.Context, seeking bool) {
	if rn.s.d.Claims == nil {
		return
	}
	rn.marked = rn.s.d.Clock.Now()
	if err := rn.s.d.Claims.Reading(ctx, rn.r.DLQ, rn.r.ID, seeking, rn.s.cfg.LeaseTTL); err != nil {
		rn.warn("mark reading", err)
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
	if ctx.Err() != nil {
		return // shutting down: the mark expires after the lease time
	}
	if err := rn.s.d.Claims.DoneReading(ctx, rn.r.DLQ, rn.r.ID); err != nil {
		rn.warn("unmark reading", err)
	}
}

// yieldCursor is called by a settling step: every markEvery while the
// run's cursor is open, it refreshes the run's mark, and releases the
// cursor when another replay seeks picks on the DLQ (the bypass check
// allows for what the cursor held being ready again: see bypassBase).
func (rn *run) yieldCursor(ctx context.Context) {
	if rn.cur == nil || rn.s.d.Claims == nil || rn.s.d.Clock.Now().Sub(rn.marked) < markEvery {
		return
	}
	seekers, err := rn.s.d.Claims.Seekers(ctx, rn.r.DLQ, rn.r.ID)
	if err != nil {
		rn.warn("seekers", err)
	}
	if len(seekers) == 0 {
		rn.markReading(ctx, false)
		return
	}
	rn.releaseCursor("dlqbot " + strings.Join(seekers, ", ") + " looks for messages it may hold")
}

// scanReaderPrefix starts the reader id a scanWhole marks itself with.
const scanReaderPrefix = "read_"

// cursorYieldWait bounds how long a read of a whole DLQ (a preview, an
// approval's compare, a check) waits for the cursors of other replays to
// give back what they hold: a settling replay yields within markEvery, a
// replay sending a step only after it.
const cursorYieldWait = 3 * markEvery

// scanWhole is Broker.Scan of dlq for a read that must see the whole DLQ:
// it marks itself seeking first and waits (up to cursorYieldWait) until no
// replay's cursor holds messages of the DLQ, so that what a settling
// replay's cursor held is read too, in its place, rather than taken for
// gone or for another client's.
func (s *Service) scanWhole(ctx context.Context, dlq string, visit func(Message) error) (ScanInfo, error) {
	if s.d.Claims != nil {
		self := NewID(scanReaderPrefix)
		if err := s.d.Claims.Reading(ctx, dlq, self, true, s.cfg.LeaseTTL); err != nil {
			s.cfg.Log.Warn().Err(err).Str("dlq", dlq).Msg("mark reading")
		}
		defer func() {
			if ctx.Err() == nil { // else the mark expires after the lease time
				_ = s.d.Claims.DoneReading(ctx, dlq, self)
			}
		}()
		for deadline := s.d.Clock.Now().Add(cursorYieldWait); s.d.Clock.Now().Before(deadline); {
			cs, err := s.d.Claims.Cursors(ctx, dlq, self)
			if err != nil || len(cs) == 0 {
				break
			}
			select {
			case <-ctx.Done():
				return ScanInfo{}, ctx.Err()
			case <-s.d.Clock.After(100 * time.Millisecond):
			}
		}
	}
	return s.d.Broker.Scan(ctx, dlq, visit)
}
