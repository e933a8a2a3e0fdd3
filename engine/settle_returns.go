package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// returnsLook is one step's state of looking for returns.
type returnsLook struct {
	lastLook time.Time // when the DLQ was last re-read (zero: not yet)
	// ready0 and arrived0 are the DLQ's ready count and its tap's
	// recorded arrivals before the step published (ready0 −1: unknown),
	// and removed the originals the step took out of the DLQ: the DLQ
	// cannot grow by more than its tap received unless something bypasses
	// its bindings.
	ready0   int
	arrived0 int64
	removed  int
}

// newLook starts a step's look for returns, before the step publishes.
func (rn *run) newLook(ctx context.Context) *returnsLook {
	look := &returnsLook{ready0: -1}
	if rn.mode != ReturnsTap {
		return look
	}
	// Without a baseline the step's bypass check is skipped.
	if _, err := rn.s.recordTap(ctx, rn.r.DLQ); err != nil {
		rn.warn("record tap", err)
		return look
	}
	ready, ok := rn.stableReady(ctx)
	if !ok {
		return look
	}
	a, err := rn.s.d.Returns.Arrived(ctx, rn.r.DLQ)
	if err != nil {
		rn.warn("read tap arrivals", err)
		return look
	}
	look.ready0, look.arrived0 = ready, a
	return look
}

// stableReady is the classic DLQ's ready count once it holds still (two
// readings 100 ms apart agree, within 1 s): messages a read gave back
// take a moment to reappear. ok is false for a quorum DLQ (it applies
// give-backs asynchronously, for longer: its count is no measure of new
// arrivals), when the count would not settle, or when reading it is slow
// (a queue that busy is taking back messages: the check is skipped rather
// than paid for at every step).
func (rn *run) stableReady(ctx context.Context) (int, bool) {
	clock := rn.s.d.Clock
	last := -1
	deadline := clock.Now().Add(time.Second)
	for {
		asked := clock.Now()
		st, err := rn.s.d.Broker.Inspect(ctx, rn.r.DLQ)
		if err != nil {
			rn.warn("inspect dlq", err)
			return 0, false
		}
		if st.Type != "classic" || clock.Now().Sub(asked) > 250*time.Millisecond {
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

// startReturns prepares a run's way of finding returns before anything is
// published: the tap when the DLQ has one (see prepareTap), else counted
// re-reads of the DLQ. A resumed run starts from what is recorded, so
// copies that came back while nobody ran the replay are counted once and
// nothing counted before is counted again.
func (rn *run) startReturns(ctx context.Context) error {
	rn.mode, rn.modeNote = rn.prepareTap(ctx)
	rn.r.ReturnsMode = rn.mode
	for _, f := range rn.r.Failures {
		if f.Kind == FailureReturned {
			rn.listed++
		}
	}
	if rn.mode == ReturnsTap {
		rec, err := rn.s.d.Returns.Returned(ctx, rn.r.ID, -1)
		if err != nil {
			return fmt.Errorf("engine: run %s: read returns: %w", rn.r.ID, err)
		}
		rn.tapTotal = rec.Total
		rn.r.Returned = max(rn.r.Returned, rec.Total)
		return nil
	}
	if rn.r.Step == 0 {
		return nil
	}
	// Re-reads count returns as copies seen in the DLQ beyond those seen
	// before: a resumed run first notes what is there already.
	_, err := rn.s.d.Broker.Scan(ctx, rn.r.DLQ, func(m Message) error {
		meta := rn.s.ParseMeta(rn.r.DLQ, m)
		if meta.ReplayID == rn.r.ID && meta.Returned {
			rn.returnedSeen[meta.ID]++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("engine: run %s: read %s for earlier returns: %w", rn.r.ID, rn.r.DLQ, err)
	}
	return nil
}

// lookForReturns updates the run's returned and new-failure counts. With a
// tap it reads the tap's record (cheap, every poll); with re-reads it reads
// the DLQ once per step, when the step has settled (final). A failed look
// while the step settles is retried at the next poll; a failed final look
// is an error, since "none came back" would then be a claim nobody checked.
func (rn *run) lookForReturns(ctx context.Context, look *returnsLook, now time.Time, final bool) error {
	if rn.mode == ReturnsTap {
		err := rn.tapReturns(ctx)
		if err != nil && final {
			return fmt.Errorf("engine: run %s: look for returns in the tap of %s: %w", rn.r.ID, rn.r.DLQ, err)
		}
		if err != nil {
			rn.warn("look for returns in the tap", err) // retried at the next poll
		}
		if err == nil && final {
			return rn.checkBypass(ctx, look)
		}
		return nil
	}
	if !final {
		return nil
	}
	look.lastLook = now
	return rn.rereadReturns(ctx)
}

// tapReturns drains the DLQ's tap into the store and reads the replay's
// record: the returned count grows by the events recorded since the last
// look (counted, never a maximum), and new events are listed as failures.
func (rn *run) tapReturns(ctx context.Context) error {
	if _, err := rn.s.recordTap(ctx, rn.r.DLQ); err != nil {
		return err
	}
	rec, err := rn.s.d.Returns.Returned(ctx, rn.r.ID, rn.listed)
	if err != nil {
		return err
	}
	arrived, err := rn.s.d.Returns.Arrived(ctx, rn.r.DLQ)
	if err != nil {
		return err
	}
	if rec.Total > rn.tapTotal {
		rn.r.Returned += rec.Total - rn.tapTotal
		rn.tapTotal = rec.Total
	}
	for _, ev := range rec.Events {
		rn.fail(Failure{ID: ev.ID, Target: ev.Source, Kind: FailureReturned, Reason: ev.Reason, Detail: ev.Exception})
	}
	rn.listed += len(rec.Events)
	rn.r.NewFailures = max(0, int(arrived-rec.Baseline)-rec.Total)
	return nil
}

// rereadReturns reads the DLQ without changing it: a copy carrying this
// replay's id and a new death beyond the copies of its id seen before is a
// new return (so returns are counted as they arrive, and copies that left
// the DLQ meanwhile — parked, replayed elsewhere — take nothing away);
// messages that died since the replay started without its id are new
// failures.
func (rn *run) rereadReturns(ctx context.Context) error {
	seen := map[string]int{}
	fresh := 0
	_, err := rn.s.d.Broker.Scan(ctx, rn.r.DLQ, func(m Message) error {
		meta := rn.s.ParseMeta(rn.r.DLQ, m)
		switch {
		case meta.ReplayID == rn.r.ID && meta.Returned:
			seen[meta.ID]++
			if seen[meta.ID] > rn.returnedSeen[meta.ID] {
				rn.returnedSeen[meta.ID] = seen[meta.ID]
				rn.r.Returned++
				rn.fail(Failure{ID: meta.ID, Target: meta.Source, Kind: FailureReturned, Reason: string(meta.Reason), Detail: meta.Exception})
			}
		case meta.ReplayID != rn.r.ID && rn.isNew(meta):
			fresh++
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrReadBudget) {
			return fmt.Errorf("engine: run %s: re-reading %s for returns: %w", rn.r.ID, rn.r.DLQ, err)
		}
		return fmt.Errorf("engine: run %s: re-read %s for returns: %w", rn.r.ID, rn.r.DLQ, err)
	}
	rn.r.NewFailures = fresh
	return nil
}

// checkBypass compares, at the end of a step, how much the DLQ grew with
// how many dead letters its tap recorded meanwhile. More growth means
// something puts messages into the DLQ without its bindings (a framework
// publishing straight to it through the default exchange), which no tap
// can see: the run then re-reads the DLQ for this step and every later
// one, and says so. Returns counted from the tap are not counted again.
func (rn *run) checkBypass(ctx context.Context, look *returnsLook) error {
	if look.ready0 < 0 {
		return nil
	}
	ready, ok := rn.stableReady(ctx)
	if !ok {
		return nil
	}
	// Without the counts the check is skipped for this step: the tap's
	// record of returns stands, and the next step checks again.
	if _, err := rn.s.recordTap(ctx, rn.r.DLQ); err != nil {
		rn.warn("record tap", err)
		return nil
	}
	a, err := rn.s.d.Returns.Arrived(ctx, rn.r.DLQ)
	if err != nil {
		rn.warn("read tap arrivals", err)
		return nil
	}
	bypassed := (ready - (look.ready0 - look.removed)) - int(a-look.arrived0)
	if bypassed <= 0 {
		return nil
	}
	// The counts suggest a bypass (or another reader's give-backs): read
	// the DLQ once (a classic DLQ: no delivery counts) and switch only if
	// it holds returns the tap did not see.
	seen := map[string]int{}
	inDLQ := 0
	var extra []Failure
	_, err = rn.s.d.Broker.Scan(ctx, rn.r.DLQ, func(m Message) error {
		meta := rn.s.ParseMeta(rn.r.DLQ, m)
		if meta.ReplayID == rn.r.ID && meta.Returned {
			seen[meta.ID]++
			inDLQ++
			if inDLQ > rn.tapTotal {
				extra = append(extra, Failure{ID: meta.ID, Target: meta.Source, Kind: FailureReturned, Reason: string(meta.Reason), Detail: meta.Exception})
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("engine: run %s: re-read %s for returns: %w", rn.r.ID, rn.r.DLQ, err)
	}
	if inDLQ <= rn.tapTotal {
		rn.s.cfg.Log.Info().Str("replay_id", rn.r.ID).Str("dlq", rn.r.DLQ).Str("op", "check tap bypass").Int("bypassed", bypassed).
			Msg("the DLQ grew by more than its tap recorded, but holds no return the tap missed")
		return nil
	}
	rn.mode, rn.r.ReturnsMode = ReturnsReread, ReturnsReread
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
