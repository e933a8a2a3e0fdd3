package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
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
func (rf *returnsFinder) bypassBaseline(ctx context.Context, patient bool) {
	rf.bp.ready0 = -1
	if rf.bp.none {
		return
	}
	if _, err := rf.s.base.RecordTap(ctx, rf.dlq); err != nil {
		rf.s.base.Warn(rf.id, rf.dlq, "record tap", err)
		return
	}
	ready, ok := rf.stableReady(ctx, patient)
	if !ok {
		return
	}
	a, err := rf.s.d.Returns.Arrived(ctx, rf.dlq)
	if err != nil {
		rf.s.base.Warn(rf.id, rf.dlq, "read tap arrivals", err)
		return
	}
	rf.bp = bypassBase{ready0: ready, arrived0: a, held0: rf.rn.cursorHeld(), at: rf.s.d.Clock.Now()}
}

// bypassDue reports whether a step's final look checks for a bypass now:
// a canary step, the run's last judgement (patient), or
// Config.Tune.BypassEvery since the baseline.
func (rf *returnsFinder) bypassDue(look *returnsLook, patient bool) bool {
	if rf.bp.ready0 < 0 {
		return false
	}
	return patient || look.canary || rf.s.d.Clock.Now().Sub(rf.bp.at) >= rf.s.cfg.Tune.BypassEvery
}

// stableReady is the classic DLQ's ready count once it holds still (two
// readings 100 ms apart agree, within 2 s): messages a read gave back
// take a moment to reappear. ok is false for a quorum DLQ (it applies
// give-backs asynchronously, for longer: its count is no measure of new
// arrivals), when the count would not settle, or when reading it is slow
// (over 1 s: a queue that busy is taking back messages, and the check is
// skipped rather than paid for). A patient read (the run's last step)
// waits up to lastLookPatience however slow each reading is.
func (rf *returnsFinder) stableReady(ctx context.Context, patient bool) (int, bool) {
	clock := rf.s.d.Clock
	last := -1
	deadline := clock.Now().Add(2 * time.Second)
	if patient {
		deadline = clock.Now().Add(lastLookPatience)
	}
	for {
		asked := clock.Now()
		st, err := rf.s.d.Broker.Inspect(ctx, rf.dlq)
		if err != nil {
			rf.s.base.Warn(rf.id, rf.dlq, "inspect dlq", err)
			return 0, false
		}
		if st.Type != "classic" {
			rf.bp.none = st.Type != ""
			return 0, false
		}
		if !patient && clock.Now().Sub(asked) > time.Second {
			return 0, false
		}
		if st.Ready == last {
			return st.Ready, true
		}
		last = st.Ready
		if clock.Now().After(deadline) || rf.rn.ctl.err() != nil {
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
func (rf *returnsFinder) checkBypass(ctx context.Context, look *returnsLook) error {
	patient := look.alone && (rf.rn.r.Returned > look.before || rf.rn.toSend() == 0)
	if !rf.bypassDue(look, patient) {
		return nil
	}
	bypassed, next, ok := rf.unseenGrowthRefilled(ctx, patient)
	if !ok {
		return nil // the baseline stands: the next due step checks again
	}
	if bypassed <= 0 {
		rf.bp = next
		return nil
	}
	// The counts suggest a bypass (or another reader's give-backs): read
	// the DLQ once (a classic DLQ: no delivery counts) and switch only if
	// it holds returns the tap did not see. The cursor gives back what it
	// holds first: returns reach the DLQ's tail, where its read may have
	// taken them, out of the scan's sight.
	rf.rn.releaseCursor("a bypass check reads the whole DLQ")
	seen, inDLQ, extra, cov, err := rf.readReturns(ctx, patient)
	if err != nil {
		return fmt.Errorf("engine: run %s: re-read %s for returns: %w", rf.id, rf.dlq, err)
	}
	if inDLQ <= rf.tapTotal && !cov.Whole() {
		// Returns may be among what the read could not see: nothing is
		// concluded. The baseline's counts stand, so the next due check
		// sees the growth again (due from now: a client that holds
		// messages for long costs a read per Config.Tune.BypassEvery, not per
		// step); the run's last judgement cannot end on a claim nobody
		// checked.
		rf.bp.at = rf.s.d.Clock.Now()
		if patient {
			return fmt.Errorf("engine: run %s: %s grew by %d more than its tap recorded, and a read of it could not tell whether those are returns (%s; run check once it has let go): %w",
				rf.id, rf.dlq, bypassed, rf.scanHeldWords(cov), engine.ErrHeldElsewhere)
		}
		rf.s.cfg.Log.Warn().Str("replay_id", rf.id).Str("dlq", rf.dlq).Str("op", "check tap bypass").Int("bypassed", bypassed).
			Int("read", cov.Read).Int("ready", cov.Ready).Msg("the DLQ grew by more than its tap recorded, and " + rf.scanHeldWords(cov) + ": checked again at the next due step")
		return nil
	}
	rf.bp = next
	if inDLQ <= rf.tapTotal {
		rf.s.cfg.Log.Info().Str("replay_id", rf.id).Str("dlq", rf.dlq).Str("op", "check tap bypass").Int("bypassed", bypassed).
			Msg("the DLQ grew by more than its tap recorded, but holds no return the tap missed")
		return nil
	}
	rf.mode, rf.rn.r.ReturnsMode = engine.ReturnsReread, engine.ReturnsReread
	rf.modeNote = fmt.Sprintf("%d return(s) reached %s without passing its bindings (published straight to it?), so the tap cannot see every return", inDLQ-rf.tapTotal, rf.dlq)
	rf.returnedSeen = seen
	rf.rn.r.Returned += inDLQ - rf.tapTotal
	for _, f := range extra {
		rf.rn.fail(f)
	}
	rf.s.cfg.Log.Warn().Str("replay_id", rf.id).Str("dlq", rf.dlq).Str("op", "check tap bypass").Int("bypassed", inDLQ-rf.tapTotal).
		Msg("returns reached the DLQ without passing its bindings: re-reading it from now on")
	return nil
}

// unseenGrowthRefilled is unseenGrowth once the cursor's window has been
// refilled, or cursorRefillWait has passed; ok is false when the counts
// cannot be had or ctx ends.
func (rf *returnsFinder) unseenGrowthRefilled(ctx context.Context, patient bool) (int, bypassBase, bool) {
	bypassed, next, ok := rf.unseenGrowth(ctx, patient)
	// The cursor's window is counted full (Cursor.Held), but the broker
	// refills what the step acked from it a moment later: until it has,
	// the DLQ's ready count is that much higher, which is no bypass. Under
	// load that moment outlasted stableReady's, and the scan in checkBypass
	// then read the whole DLQ again (a filtered replay of 100,000 took
	// 192,899 deliveries instead of 100,000): wait for the refill first.
	clock := rf.s.d.Clock
	for deadline := clock.Now().Add(cursorRefillWait); ok && bypassed > 0 && rf.rn.cur != nil && clock.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return 0, next, false
		case <-clock.After(rf.s.cfg.SettlePoll):
		}
		bypassed, next, ok = rf.unseenGrowth(ctx, patient)
	}
	return bypassed, next, ok
}

// readReturns reads the whole DLQ for this run's returns: how many of
// each id it holds, how many in all, the failures of those past the tap's
// count, and what the read covered (patient: checkBypass's).
func (rf *returnsFinder) readReturns(ctx context.Context, patient bool) (map[string]int, int, []engine.Failure, engine.Coverage, error) {
	var (
		seen  map[string]int
		inDLQ int
		extra []engine.Failure
	)
	within := scanRetry
	if patient {
		within = lastLookPatience
	}
	cov, err := rf.scanWhole(ctx, within, func() {
		seen, inDLQ, extra = map[string]int{}, 0, nil
	}, func(m letter.Message) error {
		meta := rf.s.base.ViewMeta(rf.dlq, m)
		if meta.ReplayID == rf.id && meta.Returned {
			seen[meta.ID]++
			inDLQ++
			if inDLQ > rf.tapTotal {
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
func (rf *returnsFinder) unseenGrowth(ctx context.Context, patient bool) (int, bypassBase, bool) {
	n, ok := rf.stableReady(ctx, patient)
	if !ok {
		return 0, bypassBase{}, false
	}
	if _, err := rf.s.base.RecordTap(ctx, rf.dlq); err != nil {
		rf.s.base.Warn(rf.id, rf.dlq, "record tap", err)
		return 0, bypassBase{}, false
	}
	a, err := rf.s.d.Returns.Arrived(ctx, rf.dlq)
	if err != nil {
		rf.s.base.Warn(rf.id, rf.dlq, "read tap arrivals", err)
		return 0, bypassBase{}, false
	}
	b, held := rf.bp, rf.rn.cursorHeld()
	next := bypassBase{ready0: n, arrived0: a, held0: held, at: rf.s.d.Clock.Now()}
	expected := b.ready0 + (b.held0 - held) - b.removed
	return (n - expected) - int(a-b.arrived0), next, true
}
