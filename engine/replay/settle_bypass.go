package replay

import (
	"context"
	"fmt"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
	"time"
)

// lastLookPatience bounds how long the run's last step waits for the
// classic DLQ's ready count to hold still for its bypass check (and the
// baseline, when the step plans all that is left and none was read),
// however slow the count is to read. Other steps skip the check instead
// (stableReady). Beside make test's other lanes a passive declare and the
// management API together took over a second, and a one-step replay never
// saw the copies published past its tap.
const lastLookPatience = 15 * time.Second

// bypassBase is the run's baseline for the bypass check.
type bypassBase struct {
	// ready0 is the DLQ's ready count when the baseline was read (−1:
	// none), arrived0 the tap's recorded arrivals then, and held0 what
	// the run's cursor held then (out of the ready count; what it holds
	// later is allowed for, however it changed: reads, acks, releases).
	ready0   int
	arrived0 int64
	held0    int
	// removed counts the originals the run's steps took out of the DLQ
	// since (their copies sent).
	removed int
	// at is when the baseline was read.
	at time.Time
	// none is set once the DLQ is seen not to be classic: its count is no
	// measure of arrivals (stableReady), and no baseline is read again.
	none bool
}

// bypassBaseline reads the run's baseline (patient: see
// lastLookPatience). Without one, the bypass check is skipped until a
// later step reads it.
func (rn *run) bypassBaseline(ctx context.Context, patient bool) {
	rn.bp.ready0 = -1
	if rn.bp.none {
		return
	}
	if _, err := rn.s.base.RecordTap(ctx, rn.r.DLQ); err != nil {
		rn.Warn("record tap", err)
		return
	}
	ready, ok := rn.stableReady(ctx, patient)
	if !ok {
		return
	}
	a, err := rn.s.d.Returns.Arrived(ctx, rn.r.DLQ)
	if err != nil {
		rn.Warn("read tap arrivals", err)
		return
	}
	rn.bp = bypassBase{ready0: ready, arrived0: a, held0: rn.cursorHeld(), at: rn.s.d.Clock.Now()}
}

// bypassDue reports whether a step's final look checks for a bypass now:
// a canary step, the run's last judgement (patient), or
// Config.BypassEvery since the baseline.
func (rn *run) bypassDue(look *returnsLook, patient bool) bool {
	if rn.bp.ready0 < 0 {
		return false
	}
	return patient || look.canary || rn.s.d.Clock.Now().Sub(rn.bp.at) >= rn.s.cfg.BypassEvery
}

// stableReady is the classic DLQ's ready count once it holds still (two
// readings 100 ms apart agree, within 2 s): messages a read gave back
// take a moment to reappear. ok is false for a quorum DLQ (it applies
// give-backs asynchronously, for longer: its count is no measure of new
// arrivals), when the count would not settle, or when reading it is slow
// (over 1 s: a queue that busy is taking back messages, and the check is
// skipped rather than paid for). A patient read (the run's last step)
// waits up to lastLookPatience however slow each reading is.
func (rn *run) stableReady(ctx context.Context, patient bool) (int, bool) {
	clock := rn.s.d.Clock
	last := -1
	deadline := clock.Now().Add(2 * time.Second)
	if patient {
		deadline = clock.Now().Add(lastLookPatience)
	}
	for {
		asked := clock.Now()
		st, err := rn.s.d.Broker.Inspect(ctx, rn.r.DLQ)
		if err != nil {
			rn.Warn("inspect dlq", err)
			return 0, false
		}
		if st.Type != "classic" {
			rn.bp.none = st.Type != ""
			return 0, false
		}
		if !patient && clock.Now().Sub(asked) > time.Second {
			return 0, false
		}
		if st.Ready == last {
			return st.Ready, true
		}
		last = st.Ready
		if clock.Now().After(deadline) || rn.ctl.err() != nil {
			return 0, false // not worth holding up a pause or cancel
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-clock.After(100 * time.Millisecond):
		}
	}
}

// checkBypass compares, when a bypass check is due at the end of a step
// (bypassDue), how much the DLQ grew since the run's baseline with how
// many dead letters its tap recorded meanwhile. More growth means
// something puts messages into the DLQ without its bindings, which no tap
// can see: the run then re-reads the DLQ for this step and every later
// one, and says so. Returns counted from the tap are not counted again.
// A check whose counts could be read sets the next baseline.
func (rn *run) checkBypass(ctx context.Context, look *returnsLook) error {
	patient := look.alone && (rn.r.Returned > look.before || rn.toSend() == 0)
	if !rn.bypassDue(look, patient) {
		return nil
	}
	bypassed, next, ok := rn.unseenGrowthRefilled(ctx, patient)
	if !ok {
		return nil // the baseline stands: the next due step checks again
	}
	if bypassed <= 0 {
		rn.bp = next
		return nil
	}
	// The counts suggest a bypass (or another reader's give-backs): read
	// the DLQ once (a classic DLQ: no delivery counts) and switch only if
	// it holds returns the tap did not see. The cursor gives back what it
	// holds first: returns reach the DLQ's tail, where its read may have
	// taken them, out of the scan's sight.
	rn.releaseCursor("a bypass check reads the whole DLQ")
	seen, inDLQ, extra, cov, err := rn.readReturns(ctx, patient)
	if err != nil {
		return fmt.Errorf("engine: run %s: re-read %s for returns: %w", rn.r.ID, rn.r.DLQ, err)
	}
	if inDLQ <= rn.tapTotal && !cov.Whole() {
		// Returns may be among what the read could not see: nothing is
		// concluded. The baseline's counts stand, so the next due check
		// sees the growth again (due from now: a client that holds
		// messages for long costs a read per Config.BypassEvery, not per
		// step); the run's last judgement cannot end on a claim nobody
		// checked.
		rn.bp.at = rn.s.d.Clock.Now()
		if patient {
			return fmt.Errorf("engine: run %s: %s grew by %d more than its tap recorded, and a read of it could not tell whether those are returns (%s; run check once it has let go): %w",
				rn.r.ID, rn.r.DLQ, bypassed, rn.scanHeldWords(cov), engine.ErrHeldElsewhere)
		}
		rn.s.cfg.Log.Warn().Str("replay_id", rn.r.ID).Str("dlq", rn.r.DLQ).Str("op", "check tap bypass").Int("bypassed", bypassed).
			Int("read", cov.Read).Int("ready", cov.Ready).Msg("the DLQ grew by more than its tap recorded, and " + rn.scanHeldWords(cov) + ": checked again at the next due step")
		return nil
	}
	rn.bp = next
	if inDLQ <= rn.tapTotal {
		rn.s.cfg.Log.Info().Str("replay_id", rn.r.ID).Str("dlq", rn.r.DLQ).Str("op", "check tap bypass").Int("bypassed", bypassed).
			Msg("the DLQ grew by more than its tap recorded, but holds no return the tap missed")
		return nil
	}
	rn.mode, rn.r.ReturnsMode = engine.ReturnsReread, engine.ReturnsReread
	rn.modeNote = fmt.Sprintf("%d return(s) reached %s without passing its bindings (published straight to it?), so the tap cannot see every return", inDLQ-rn.tapTotal, rn.r.DLQ)
	rn.returnedSeen = seen
	rn.r.Returned += inDLQ - rn.tapTotal
	for _, f := range extra {
		rn.fail(f)
	}
	rn.s.cfg.Log.Warn().Str("replay_id", rn.r.ID).Str("dlq", rn.r.DLQ).Str("op", "check tap bypass").Int("bypassed", inDLQ-rn.tapTotal).
		Msg("returns reached the DLQ without passing its bindings: re-reading it from now on")
	return nil
}

// unseenGrowthRefilled is unseenGrowth once the cursor's window has been
// refilled, or cursorRefillWait has passed; ok is false when the counts
// cannot be had or ctx ends.
func (rn *run) unseenGrowthRefilled(ctx context.Context, patient bool) (int, bypassBase, bool) {
	bypassed, next, ok := rn.unseenGrowth(ctx, patient)
	// The cursor's window is counted full (Cursor.Held), but the broker
	// refills what the step acked from it a moment later: until it has,
	// the DLQ's ready count is that much higher, which is no bypass. Under
	// load that moment outlasted stableReady's, and the scan in checkBypass
	// then read the whole DLQ again (a filtered replay of 100,000 took
	// 192,899 deliveries instead of 100,000): wait for the refill first.
	clock := rn.s.d.Clock
	for deadline := clock.Now().Add(cursorRefillWait); ok && bypassed > 0 && rn.cur != nil && clock.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return 0, next, false
		case <-clock.After(rn.s.cfg.SettlePoll):
		}
		bypassed, next, ok = rn.unseenGrowth(ctx, patient)
	}
	return bypassed, next, ok
}

// readReturns reads the whole DLQ for this run's returns: how many of
// each id it holds, how many in all, the failures of those past the tap's
// count, and what the read covered (patient: checkBypass's).
func (rn *run) readReturns(ctx context.Context, patient bool) (map[string]int, int, []engine.Failure, engine.Coverage, error) {
	var (
		seen  map[string]int
		inDLQ int
		extra []engine.Failure
	)
	within := scanRetry
	if patient {
		within = lastLookPatience
	}
	cov, err := rn.scanWhole(ctx, within, func() {
		seen, inDLQ, extra = map[string]int{}, 0, nil
	}, func(m letter.Message) error {
		meta := rn.s.base.ViewMeta(rn.r.DLQ, m)
		if meta.ReplayID == rn.r.ID && meta.Returned {
			seen[meta.ID]++
			inDLQ++
			if inDLQ > rn.tapTotal {
				extra = append(extra, returnedFailure(meta))
			}
		}
		return nil
	})
	return seen, inDLQ, extra, cov, err
}

// unseenGrowth is how much more the DLQ grew since the run's baseline than
// its tap recorded arrivals, the originals the steps took out and what the
// cursor holds allowed for, and next the baseline these readings make; ok
// is false when the counts cannot be had (the check is then skipped: the
// tap's record of returns stands, and a later step checks again); patient
// is stableReady's.
func (rn *run) unseenGrowth(ctx context.Context, patient bool) (int, bypassBase, bool) {
	if !patient {
		if next, ok := rn.exactGrowth(ctx); ok {
			return 0, next, true
		}
	}
	return rn.unseenGrowthAt(ctx, func(ctx context.Context) (int, bool) { return rn.stableReady(ctx, patient) })
}

// exactGrowthWait bounds how long a check that is not the run's last
// polls single readings for one that matches exactly (exactGrowth).
const exactGrowthWait = 500 * time.Millisecond

// exactGrowth reports whether a single reading of the DLQ's ready count
// (readyOnce) matched exactly, within exactGrowthWait, what the tap, the
// steps and the cursor account for, and the baseline that reading makes.
// A count above it falls as the broker refills the cursor's window after
// the step's acks (from moments to a few hundred milliseconds on 3.10,
// which pays for each ack in proportion to what the channel holds): it is
// read again every 25 ms rather than wait for two readings 100 ms apart
// to agree. A count below it (something left, or give-backs still on
// their way) ends the polling at once, and stableReady decides.
func (rn *run) exactGrowth(ctx context.Context) (bypassBase, bool) {
	clock := rn.s.d.Clock
	deadline := clock.Now().Add(exactGrowthWait)
	for {
		growth, next, ok := rn.unseenGrowthAt(ctx, rn.readyOnce)
		if !ok || growth < 0 {
			return bypassBase{}, false
		}
		if growth == 0 {
			return next, true
		}
		if !clock.Now().Before(deadline) || rn.ctl.err() != nil {
			return bypassBase{}, false
		}
		select {
		case <-ctx.Done():
			return bypassBase{}, false
		case <-clock.After(25 * time.Millisecond):
		}
	}
}

// unseenGrowthAt is unseenGrowth with the DLQ's ready count read by
// ready (stableReady, or readyOnce).
func (rn *run) unseenGrowthAt(ctx context.Context, ready func(context.Context) (int, bool)) (int, bypassBase, bool) {
	n, ok := ready(ctx)
	if !ok {
		return 0, bypassBase{}, false
	}
	if _, err := rn.s.base.RecordTap(ctx, rn.r.DLQ); err != nil {
		rn.Warn("record tap", err)
		return 0, bypassBase{}, false
	}
	a, err := rn.s.d.Returns.Arrived(ctx, rn.r.DLQ)
	if err != nil {
		rn.Warn("read tap arrivals", err)
		return 0, bypassBase{}, false
	}
	b, held := rn.bp, rn.cursorHeld()
	next := bypassBase{ready0: n, arrived0: a, held0: held, at: rn.s.d.Clock.Now()}
	expected := b.ready0 + (b.held0 - held) - b.removed
	return (n - expected) - int(a-b.arrived0), next, true
}

// readyOnce is the classic DLQ's ready count from one reading, for a
// check that is not the run's last: exactGrowth takes it only when it
// matches exactly what the tap, the steps and the cursor account for: a
// count falling as the cursor's window refills reaches that number once
// the refill is done. One that matched while a bypass hid behind
// give-backs still on their way in the same number would set a baseline
// lower than the DLQ's, so the growth shows at the next check (the run's
// last one always reads a stable count).
func (rn *run) readyOnce(ctx context.Context) (int, bool) {
	asked := rn.s.d.Clock.Now()
	st, err := rn.s.d.Broker.Inspect(ctx, rn.r.DLQ)
	if err != nil {
		rn.Warn("inspect dlq", err)
		return 0, false
	}
	if st.Type != "classic" {
		rn.bp.none = st.Type != ""
		return 0, false
	}
	if rn.s.d.Clock.Now().Sub(asked) > time.Second {
		return 0, false
	}
	return st.Ready, true
}
