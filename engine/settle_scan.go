package engine

import (
	"context"
	"fmt"
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
func (rn *run) scanWhole(ctx context.Context, within time.Duration, begin func(), visit func(letter.Message) error) (Coverage, error) {
	clock := rn.s.d.Clock
	deadline := clock.Now().Add(within)
	for {
		begin()
		info, err := rn.s.d.Broker.Scan(ctx, rn.r.DLQ, visit)
		if err != nil || info.Coverage.Whole() || info.Coverage.Cut || !clock.Now().Before(deadline) {
			return info.Coverage, err
		}
		select {
		case <-ctx.Done():
			return info.Coverage, ctx.Err()
		case <-clock.After(rn.s.cfg.SettlePoll):
		}
	}
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
