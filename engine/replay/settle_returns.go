package replay

import (
	"context"
	"errors"
	"fmt"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
	"github.com/stroma/dlqbot/engine/review"
	"time"
)

// returnsLook is one step's state of looking for returns.
type returnsLook struct {
	lastLook time.Time // when the DLQ was last re-read (zero: not yet)
	// since is when the look began: a window without the tap since then
	// is reconciled before the step settles.
	since time.Time
	// alone is set when the step is judged with no later step sent beside
	// it, and before is the run's returned count when it began to settle:
	// such a step is the run's last judgement when the plan is exhausted
	// or it saw returns (the run then stops), and its bypass check is
	// patient (lastLookPatience): no later step would make up for a
	// skipped one. canary is set when the step is smaller than the cap
	// (the canary phase): its bypass check is never put off (Config.BypassEvery).
	alone  bool
	before int
	canary bool
}

// newLook starts a step's look for returns, before the step publishes;
// last is true when the step plans all that is left to send (a bypass
// baseline it must read is then read patiently: see lastLookPatience).
func (rn *run) newLook(ctx context.Context, last bool) *returnsLook {
	look := &returnsLook{since: rn.s.d.Clock.Now()}
	if rn.mode == engine.ReturnsTap && rn.bp.ready0 < 0 {
		rn.bypassBaseline(ctx, last)
	}
	return look
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
		if f.Kind == engine.FailureReturned {
			rn.listed++
		}
	}
	if rn.mode == engine.ReturnsTap {
		rec, err := rn.returned(ctx, -1)
		if err != nil {
			return fmt.Errorf("engine: run %s: read returns: %w", rn.r.ID, err)
		}
		rn.tapTotal = rec.Total
		rn.r.Returned = max(rn.r.Returned, rec.Total)
		rn.gapExtra = rn.r.Returned - rec.Total // found by earlier runs' re-reads after a tap loss
		return nil
	}
	if rn.r.Step == 0 {
		return nil
	}
	seen := 0
	// Re-reads count returns as copies seen in the DLQ beyond those seen
	// before: a resumed run first notes what is there already (marked
	// reading, as its re-reads are: settle_scan.go).
	mark := rn.markScan(ctx)
	_, err := rn.s.d.Broker.Scan(ctx, rn.r.DLQ, func(m letter.Message) error {
		meta := rn.s.base.ParseMeta(rn.r.DLQ, m)
		if meta.ReplayID == rn.r.ID && meta.Returned {
			rn.returnedSeen[meta.ID]++
			seen++
		}
		return nil
	})
	mark.end(ctx)
	if err != nil {
		return fmt.Errorf("engine: run %s: read %s for earlier returns: %w", rn.r.ID, rn.r.DLQ, err)
	}
	if rn.r.ReturnsUnverified != "" {
		// The count of an untrusted tap record may have hidden these:
		// what the DLQ holds of them came back at least.
		rn.r.Returned = max(rn.r.Returned, seen)
	}
	return nil
}

// lookForReturns updates the run's returned and new-failure counts. With a
// tap it reads the tap's record (cheap, every poll); without, it looks at
// what the run's cursor saw arrive at the DLQ's tail, or else re-reads the
// DLQ, once per step, when the step has settled (final). A failed look
// while the step settles is retried at the next poll; a failed final look
// is an error, since "none came back" would then be a claim nobody checked.
func (rn *run) lookForReturns(ctx context.Context, look *returnsLook, now time.Time, final bool) error {
	if rn.mode == engine.ReturnsTap {
		err := rn.tapReturns(ctx)
		if err != nil && (final || errors.Is(err, engine.ErrReturnsUnverified)) {
			return fmt.Errorf("engine: run %s: look for returns in the tap of %s: %w", rn.r.ID, rn.r.DLQ, err)
		}
		if err != nil {
			rn.Warn("look for returns in the tap", err) // retried at the next poll
		}
		if err == nil && final {
			if gaps := rn.watch.touching(look.since); len(gaps) > 0 || rn.r.Unseen != nil {
				// The re-read covers what a bypass check would look for.
				return rn.reconcileGap(ctx, len(gaps) > 0)
			}
			return rn.checkBypass(ctx, look)
		}
		return nil
	}
	if !final {
		return nil
	}
	look.lastLook = now
	if rn.cursorReturns(ctx) { // settle_tail.go
		return nil
	}
	return rn.rereadReturns(ctx, look)
}

// tapReturns drains the DLQ's tap into the store and reads the replay's
// record: the returned count grows by the events recorded since the last
// look (counted, never a maximum), and new events are listed as failures.
func (rn *run) tapReturns(ctx context.Context) error {
	began := rn.s.d.Clock.Now()
	if _, err := rn.s.base.RecordTap(ctx, rn.r.DLQ); err != nil {
		if !errors.Is(err, engine.ErrQueueNotFound) {
			return err
		}
		// The tap is gone: the watch declares it again, and the window
		// is reconciled before the step settles. What it recorded stands.
		rn.watch.noticed(began)
	}
	rec, err := rn.returned(ctx, rn.listed)
	if err != nil {
		return err
	}
	arrived, err := rn.s.d.Returns.Arrived(ctx, rn.r.DLQ)
	if err != nil {
		return rn.unverified(err)
	}
	if rec.Total > rn.tapTotal {
		rn.r.Returned += rec.Total - rn.tapTotal
		rn.tapTotal = rec.Total
	}
	for _, ev := range rec.Events {
		rn.fail(engine.Failure{ID: ev.ID, Target: ev.Source, Kind: engine.FailureReturned, Reason: ev.Reason, Detail: ev.Exception, GroupID: groupIDOf(ev.Group)})
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
func (rn *run) rereadReturns(ctx context.Context, look *returnsLook) error {
	var (
		seen  map[string]int
		fresh int
	)
	// A read another client cut short counts what it saw (a return is
	// counted once, whichever read first sees it); only the run's last
	// judgement needs the whole DLQ, since no later read will count what
	// this one missed.
	last := look.alone && rn.toSend() == 0
	// The run's own cursor would hide what it holds from the read.
	rn.releaseCursor("the DLQ is re-read for returns")
	within := scanRetry
	if last {
		within = lastLookPatience
	}
	cov, err := rn.scanWhole(ctx, within, func() { seen, fresh = map[string]int{}, 0 }, func(m letter.Message) error {
		meta := rn.s.base.ViewMeta(rn.r.DLQ, m)
		switch {
		case meta.ReplayID == rn.r.ID && meta.Returned:
			seen[meta.ID]++
			if seen[meta.ID] > rn.returnedSeen[meta.ID] {
				rn.returnedSeen[meta.ID] = seen[meta.ID]
				rn.r.Returned++
				rn.fail(returnedFailure(meta))
			}
		case meta.ReplayID != rn.r.ID && rn.isNew(meta):
			fresh++
		}
		return nil
	})
	if err == nil && last && !cov.Whole() {
		return fmt.Errorf("engine: run %s: re-read %s for returns: %s, so the read could not tell whether every copy stayed away (run check once it has let go): %w",
			rn.r.ID, rn.r.DLQ, rn.scanHeldWords(cov), engine.ErrHeldElsewhere)
	}
	if err != nil {
		if errors.Is(err, engine.ErrReadBudget) {
			return fmt.Errorf("engine: run %s: re-reading %s for returns: %w", rn.r.ID, rn.r.DLQ, err)
		}
		return fmt.Errorf("engine: run %s: re-read %s for returns: %w", rn.r.ID, rn.r.DLQ, err)
	}
	rn.r.NewFailures = fresh
	return nil
}

// reconcileGap re-reads the DLQ after a window without its tap (a read
// counted by the read budget like any other): copies of this replay with a
// new death found there beyond those the tap recorded came back while no
// tap could see them, and are counted now; nothing is unseen afterwards.
// When the read is impossible (the read budget refuses it, the broker
// fails it) the run goes on, and says for how many copies it could not
// tell, and when the tap was gone — never that none came back. fresh is
// true when the window touched this step: the copies that could have come
// back unseen are then those sent so far (else the count stands).
func (rn *run) reconcileGap(ctx context.Context, fresh bool) error {
	rec, err := rn.returned(ctx, -1)
	if err != nil {
		return fmt.Errorf("engine: run %s: read returns: %w", rn.r.ID, err)
	}
	var (
		inDLQ int
		extra []engine.Failure
	)
	rn.releaseCursor("a re-read after a window without the tap reads the whole DLQ") // see checkBypass
	cov, err := rn.scanWhole(ctx, scanRetry, func() { inDLQ, extra = 0, nil }, func(m letter.Message) error {
		meta := rn.s.base.ViewMeta(rn.r.DLQ, m)
		if meta.ReplayID == rn.r.ID && meta.Returned {
			inDLQ++
			if _, tapped := rec.IDs[meta.ID]; !tapped {
				extra = append(extra, returnedFailure(meta))
			}
		}
		return nil
	})
	if err == nil && !cov.Whole() {
		// What the read did not see may hold copies that came back
		// unseen: as impossible as a refused read (what it found is
		// counted by the next re-read that sees the whole DLQ).
		err = fmt.Errorf("%s: %w", rn.scanHeldWords(cov), engine.ErrHeldElsewhere)
	}
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		gaps := rn.watch.all()
		count := rn.r.Sent - rn.r.Returned
		if u := rn.r.Unseen; u != nil {
			gaps = append(gaps, engine.TapGap{From: u.From, To: u.To})
			if !fresh {
				count = u.Count
			}
		}
		rn.r.Unseen = review.UnseenOf(count, gaps)
		rn.Warn("re-read the DLQ for returns while its tap was gone", err)
		return nil
	}
	if n := inDLQ - rn.tapTotal; n > rn.gapExtra {
		for _, f := range extra[:min(len(extra), n-rn.gapExtra)] {
			rn.fail(f)
		}
		rn.r.Returned += n - rn.gapExtra
		rn.gapExtra = n
	}
	rn.r.Unseen = nil
	rn.s.cfg.Log.Info().Str("replay_id", rn.r.ID).Str("dlq", rn.r.DLQ).Str("op", "reconcile tap gap").
		Int("in_dlq", inDLQ).Int("tapped", rn.tapTotal).Int("found_by_reread", rn.gapExtra).
		Msg("re-read the DLQ for the copies that came back while its tap was gone")
	return nil
}

// cameBack words the replay's returns for its final note: the count, and
// for how many copies it could not tell, when it could not.
func (rn *run) cameBack() string {
	if rn.r.ReturnsUnverified != "" {
		return rn.unverifiedBack()
	}
	if g := rn.watch.all(); len(g) > 0 && g[len(g)-1].Open() && rn.r.Unseen == nil {
		// Still gone at the end: copies may come back unseen until a
		// check re-reads the DLQ.
		rn.r.Unseen = review.UnseenOf(rn.r.Sent-rn.r.Returned, g)
	}
	if rn.r.Unseen != nil {
		return fmt.Sprintf("%d seen back, %s", rn.r.Returned, rn.r.Unseen.Words())
	}
	return fmt.Sprintf("%d came back", rn.r.Returned)
}

// returnedFailure is the record of a copy that came back, meta its dead
// letter as the run reads it: under the group id check shows it in.
func returnedFailure(meta letter.Meta) engine.Failure {
	return engine.Failure{ID: meta.ID, Target: meta.Source, Kind: engine.FailureReturned, Reason: string(meta.Reason), Detail: meta.Exception,
		GroupID: groupIDOf(meta.FailureGroup)}
}

// groupIDOf is group's GroupID, "" for no group.
func groupIDOf(group string) string {
	if group == "" {
		return ""
	}
	return engine.GroupID(group)
}
