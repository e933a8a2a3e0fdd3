package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/stroma/dlqbot/engine/letter"
)

// A run's re-reads of its DLQ (a bypass check, a re-read after a window
// without the tap, counted re-reads for returns) can only say a return is
// not there when they saw the whole DLQ (Coverage.Whole): another client
// holding or taking messages hides them from the read. scanWhole reads
// again, for a while, when another client cut a read short; a caller whose
// read still is not whole says what it could not tell instead of counting
// what it did not see.

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
// tried for as long as a step waits for a holder (Config.HeldWait): such a
// read lets go within its step or its scan, unlike an unknown client's.
func (rn *run) scanWhole(ctx context.Context, within time.Duration, begin func(), visit func(letter.Message) error) (Coverage, error) {
	clock := rn.s.d.Clock
	start := clock.Now()
	deadline := start.Add(within)
	for try := 0; ; try++ {
		begin()
		began := clock.Now()
		info, err := rn.s.d.Broker.Scan(ctx, rn.r.DLQ, visit)
		if err != nil || info.Coverage.Whole() || info.Coverage.Cut {
			return info.Coverage, err
		}
		took := clock.Now().Sub(began)
		if within >= lastLookPatience && rn.readDuring(ctx, began) {
			deadline = later(deadline, start.Add(rn.s.cfg.HeldWait))
		}
		if !clock.Now().Before(deadline) {
			return info.Coverage, nil
		}
		select {
		case <-ctx.Done():
			return info.Coverage, ctx.Err()
		case <-clock.After(rn.s.cfg.SettlePoll + backoff(took, try)):
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

// heldWords says why a read was not whole, for a note or a log line.
func heldWords(c Coverage) string {
	switch {
	case c.OtherConsumers > 0:
		return "another consumer was on it"
	case c.HeldElsewhere > 0:
		return fmt.Sprintf("another client held about %d of its messages", c.HeldElsewhere)
	default:
		return "another client took messages while it was read"
	}
}
