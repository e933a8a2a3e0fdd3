package replay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
	"github.com/stroma/dlqbot/engine/review"
)

// A run's re-reads of its DLQ (a bypass check, a re-read after a window
// without the tap, counted re-reads for returns) can only say a return is
// not there when they saw the whole DLQ (Coverage.Whole): another client
// holding or taking messages hides them from the read. scanWhole reads
// again, for a while, when another client cut a read short; a caller whose
// read still is not whole says what it could not tell instead of counting
// what it did not see.
//
// Such a re-read is dlqbot's own read of the DLQ: while it reads it marks
// the replay reading (readers.go), so that another replay whose picks it
// holds waits for it and never calls it another client. When another
// dlqbot replay's read cut it short, it marks itself seeking before it
// reads again: that replay's step gives way (giveway.go) and its read
// gives back what it holds, and the re-read tries again for at least
// giveWayWait. Should it still not be whole, it names that replay
// (scanHeldWords).

// scanRetry is how long a run's re-read that another client cut short is
// tried again, at most, outside the run's last judgement (which waits
// lastLookPatience): a preview or an operator's peek holds messages for
// moments, and a step is not held up longer for it.
const scanRetry = 2 * time.Second

// scanWhole reads the run's DLQ, calling begin before each read (to clear
// what the last read counted) and visit for every message, until a read is
// whole or within has passed; it returns the last read's coverage. A read
// that ended for any reason but another client (its caller, an error) is
// not repeated.
//
// Two dlqbot replays of one DLQ re-reading it at once cut each other's
// reads short, and would again and again if each tried again as soon as
// the other: after a read cut short the run waits a random part of that
// read's length (up to twice it, growing with each try) besides
// SettlePoll, so that one of them reads alone. A patient read (the last
// look, within lastLookPatience or more) cut short while another dlqbot
// read marked the DLQ (a replay's, a preview's, a check's: readDuring) is
// tried for as long as a step waits for a holder (Config.Tune.HeldWait): such a
// read lets go within its step or its scan, unlike an unknown client's.
func (rf *returnsFinder) scanWhole(ctx context.Context, within time.Duration, begin func(), visit func(letter.Message) error) (engine.Coverage, error) {
	clock := rf.s.d.Clock
	start := clock.Now()
	deadline := start.Add(within)
	rf.scanReplays = nil
	m := rf.markScan(ctx)
	defer m.end(ctx)
	for try := 0; ; try++ {
		begin()
		began := clock.Now()
		info, err := rf.s.d.Broker.Scan(ctx, rf.dlq, visit)
		if err != nil || info.Coverage.Whole() || info.Coverage.Cut {
			return info.Coverage, err
		}
		took := clock.Now().Sub(began)
		if within >= lastLookPatience && rf.rn.own.readDuring(ctx, began) {
			deadline = later(deadline, start.Add(rf.s.cfg.Tune.HeldWait))
		}
		if rs := rf.replayReaders(ctx); len(rs) > 0 {
			rf.scanReplays = rs
			if !m.seeking {
				// Another dlqbot replay's read: it gives way to a seeker.
				m.seek(ctx)
				deadline = later(deadline, clock.Now().Add(rf.rn.own.giveWayWait()))
			}
		}
		if !clock.Now().Before(deadline) {
			return info.Coverage, nil
		}
		select {
		case <-ctx.Done():
			return info.Coverage, ctx.Err()
		case <-clock.After(rf.s.cfg.SettlePoll + backoff(took, try)):
		}
	}
}

// backoff is a random wait of up to twice took, less on the first tries
// (a quarter, a half, then up to twice).
func backoff(took time.Duration, try int) time.Duration {
	limit := took / 4 << min(try, 3)
	if limit <= 0 {
		return 0
	}
	return rand.N(limit)
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// replayReaders are the other running dlqbot replays reading the DLQ now
// (liveReaders without previews, approvals and checks).
func (rf *returnsFinder) replayReaders(ctx context.Context) []string {
	var rs []string
	for _, id := range rf.rn.own.liveReaders(ctx) {
		if !review.IsScanReader(id) {
			rs = append(rs, id)
		}
	}
	return rs
}

// scanHeldWords says why the run's last re-read (scanWhole) was not whole:
// the dlqbot replays whose reads held messages of the DLQ while it read
// ("dlqbot replay r_… read it too …"), never another client, else
// heldWords.
func (rf *returnsFinder) scanHeldWords(c engine.Coverage) string {
	if len(rf.scanReplays) == 0 {
		return heldWords(c)
	}
	held := "held messages of it"
	if c.HeldElsewhere > 0 {
		held = fmt.Sprintf("held about %d of its messages", c.HeldElsewhere)
	}
	return "dlqbot replay " + strings.Join(rf.scanReplays, ", ") + " " + held + " (its own read of " + rf.dlq + ", not another client)"
}

// scanMark is a run's reading mark while it reads its DLQ outside a step
// (markScan).
type scanMark struct {
	rn      *run
	seeking bool
	stop    func()
}

// markScan marks the run reading its DLQ, refreshed every markEvery by
// keepMarked until end (a read of a large DLQ outlasts the lease time);
// end removes the mark, or turns it back into the cursor's.
func (rf *returnsFinder) markScan(ctx context.Context) *scanMark {
	m := &scanMark{rn: rf.rn, stop: func() {}}
	rf.rn.own.markReading(ctx, false)
	m.stop = rf.rn.own.keepMarked(ctx)
	return m
}

// seek turns the mark into a seeking one: another dlqbot replay's read
// holds messages of the DLQ, and it gives way to a seeker.
func (m *scanMark) seek(ctx context.Context) {
	m.seeking = true
	m.rn.own.markReading(ctx, true)
}

// end stops the refresh and removes the mark (doneReading).
func (m *scanMark) end(ctx context.Context) {
	m.stop()
	m.rn.own.doneReading(ctx)
}

// heldWords says why a read was not whole, for a note or a log line.
func heldWords(c engine.Coverage) string {
	switch {
	case c.OtherConsumers > 0:
		return "another consumer was on it"
	case c.HeldElsewhere > 0:
		return fmt.Sprintf("another client held about %d of its messages", c.HeldElsewhere)
	default:
		return "another client took messages while it was read"
	}
}
