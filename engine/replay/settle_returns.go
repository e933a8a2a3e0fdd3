package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
	"github.com/stroma/dlqbot/engine/review"
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
	// (the canary phase): its bypass check is never put off (Config.Tune.BypassEvery).
	alone  bool
	before int
	canary bool
}

// newLook starts a step's look for returns, before the step publishes;
// last is true when the step plans all that is left to send (a bypass
// baseline it must read is then read patiently: see lastLookPatience).
func (rf *returnsFinder) newLook(ctx context.Context, last bool) *returnsLook {
	look := &returnsLook{since: rf.s.d.Clock.Now()}
	if rf.mode == engine.ReturnsTap && rf.bp.ready0 < 0 {
		rf.bypassBaseline(ctx, last)
	}
	return look
}

// startReturns prepares a run's way of finding returns before anything is
// published: the tap when the DLQ has one (see prepareTap), else counted
// re-reads of the DLQ. A resumed run starts from what is recorded, so
// copies that came back while nobody ran the replay are counted once and
// nothing counted before is counted again.
func (rf *returnsFinder) startReturns(ctx context.Context) error {
	rf.mode, rf.modeNote = rf.prepareTap(ctx)
	rf.rn.r.ReturnsMode = rf.mode
	for _, f := range rf.rn.r.Failures {
		if f.Kind == engine.FailureReturned {
			rf.listed++
		}
	}
	if rf.mode == engine.ReturnsTap {
		rec, err := rf.rn.jd.returned(ctx, -1)
		if err != nil {
			return fmt.Errorf("engine: run %s: read returns: %w", rf.id, err)
		}
		rf.tapTotal = rec.Total
		rf.rn.r.Returned = max(rf.rn.r.Returned, rec.Total)
		rf.gapExtra = rf.rn.r.Returned - rec.Total // found by earlier runs' re-reads after a tap loss
		return nil
	}
	if rf.rn.r.Step == 0 {
		return nil
	}
	seen := 0
	// Re-reads count returns as copies seen in the DLQ beyond those seen
	// before: a resumed run first notes what is there already (marked
	// reading, as its re-reads are: settle_scan.go).
	mark := rf.markScan(ctx)
	_, err := rf.s.d.Broker.Scan(ctx, rf.dlq, func(m letter.Message) error {
		meta := rf.s.base.ParseMeta(rf.dlq, m)
		if meta.ReplayID == rf.id && meta.Returned {
			rf.returnedSeen[meta.ID]++
			seen++
		}
		return nil
	})
	mark.end(ctx)
	if err != nil {
		return fmt.Errorf("engine: run %s: read %s for earlier returns: %w", rf.id, rf.dlq, err)
	}
	if rf.rn.r.ReturnsUnverified != "" {
		// The count of an untrusted tap record may have hidden these:
		// what the DLQ holds of them came back at least.
		rf.rn.r.Returned = max(rf.rn.r.Returned, seen)
	}
	return nil
}

// lookForReturns updates the run's returned and new-failure counts. With a
// tap it reads the tap's record (cheap, every poll); without, it looks at
// what the run's cursor saw arrive at the DLQ's tail, or else re-reads the
// DLQ, once per step, when the step has settled (final). A failed look
// while the step settles is retried at the next poll; a failed final look
// is an error, since "none came back" would then be a claim nobody checked.
func (rf *returnsFinder) lookForReturns(ctx context.Context, look *returnsLook, now time.Time, final bool) error {
	if rf.mode == engine.ReturnsTap {
		err := rf.tapReturns(ctx)
		if err != nil && (final || errors.Is(err, engine.ErrReturnsUnverified)) {
			return fmt.Errorf("engine: run %s: look for returns in the tap of %s: %w", rf.id, rf.dlq, err)
		}
		if err != nil {
			rf.s.base.Warn(rf.id, rf.dlq, "look for returns in the tap", err) // retried at the next poll
		}
		if err == nil && final {
			if gaps := rf.watch.touching(look.since); len(gaps) > 0 || rf.rn.r.Unseen != nil {
				// The re-read covers what a bypass check would look for.
				return rf.reconcileGap(ctx, len(gaps) > 0)
			}
			return rf.checkBypass(ctx, look)
		}
		return nil
	}
	if !final {
		return nil
	}
	look.lastLook = now
	if rf.cursorReturns(ctx) { // settle_tail.go
		return nil
	}
	return rf.rereadReturns(ctx, look)
}

// tapReturns drains the DLQ's tap into the store and reads the replay's
// record: the returned count grows by the events recorded since the last
// look (counted, never a maximum), and new events are listed as failures.
func (rf *returnsFinder) tapReturns(ctx context.Context) error {
	began := rf.s.d.Clock.Now()
	if _, err := rf.s.base.RecordTap(ctx, rf.dlq); err != nil {
		if !errors.Is(err, engine.ErrQueueNotFound) {
			return err
		}
		// The tap is gone: the watch declares it again, and the window
		// is reconciled before the step settles. What it recorded stands.
		rf.watch.noticed(began)
	}
	rec, err := rf.rn.jd.returned(ctx, rf.listed)
	if err != nil {
		return err
	}
	arrived, err := rf.s.d.Returns.Arrived(ctx, rf.dlq)
	if err != nil {
		return rf.rn.jd.unverified(err)
	}
	if rec.Total > rf.tapTotal {
		rf.rn.r.Returned += rec.Total - rf.tapTotal
		rf.tapTotal = rec.Total
	}
	for _, ev := range rec.Events {
		rf.rn.fail(engine.Failure{ID: ev.ID, Target: ev.Source, Kind: engine.FailureReturned, Reason: ev.Reason, Detail: ev.Exception, GroupID: groupIDOf(ev.Group)})
	}
	rf.listed += len(rec.Events)
	rf.rn.r.NewFailures = max(0, int(arrived-rec.Baseline)-rec.Total)
	return nil
}

// rereadReturns reads the DLQ without changing it: a copy carrying this
// replay's id and a new death beyond the copies of its id seen before is a
// new return (so returns are counted as they arrive, and copies that left
// the DLQ meanwhile — parked, replayed elsewhere — take nothing away);
// messages that died since the replay started without its id are new
// failures.
func (rf *returnsFinder) rereadReturns(ctx context.Context, look *returnsLook) error {
	var (
		seen  map[string]int
		fresh int
	)
	// A read another client cut short counts what it saw (a return is
	// counted once, whichever read first sees it); only the run's last
	// judgement needs the whole DLQ, since no later read will count what
	// this one missed.
	last := look.alone && rf.rn.toSend() == 0
	// The run's own cursor would hide what it holds from the read.
	rf.rn.releaseCursor("the DLQ is re-read for returns")
	within := scanRetry
	if last {
		within = lastLookPatience
	}
	cov, err := rf.scanWhole(ctx, within, func() { seen, fresh = map[string]int{}, 0 }, func(m letter.Message) error {
		meta := rf.s.base.ViewMeta(rf.dlq, m)
		switch {
		case meta.ReplayID == rf.id && meta.Returned:
			seen[meta.ID]++
			if seen[meta.ID] > rf.returnedSeen[meta.ID] {
				rf.returnedSeen[meta.ID] = seen[meta.ID]
				rf.rn.r.Returned++
				rf.rn.fail(returnedFailure(meta))
			}
		case meta.ReplayID != rf.id && rf.rn.jd.isNew(meta):
			fresh++
		}
		return nil
	})
	if err == nil && last && !cov.Whole() {
		return fmt.Errorf("engine: run %s: re-read %s for returns: %s, so the read could not tell whether every copy stayed away (run check once it has let go): %w",
			rf.id, rf.dlq, rf.scanHeldWords(cov), engine.ErrHeldElsewhere)
	}
	if err != nil {
		if errors.Is(err, engine.ErrReadBudget) {
			return fmt.Errorf("engine: run %s: re-reading %s for returns: %w", rf.id, rf.dlq, err)
		}
		return fmt.Errorf("engine: run %s: re-read %s for returns: %w", rf.id, rf.dlq, err)
	}
	rf.rn.r.NewFailures = fresh
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
func (rf *returnsFinder) reconcileGap(ctx context.Context, fresh bool) error {
	rec, err := rf.rn.jd.returned(ctx, -1)
	if err != nil {
		return fmt.Errorf("engine: run %s: read returns: %w", rf.id, err)
	}
	var (
		inDLQ int
		extra []engine.Failure
	)
	rf.rn.releaseCursor("a re-read after a window without the tap reads the whole DLQ") // see checkBypass
	cov, err := rf.scanWhole(ctx, scanRetry, func() { inDLQ, extra = 0, nil }, func(m letter.Message) error {
		meta := rf.s.base.ViewMeta(rf.dlq, m)
		if meta.ReplayID == rf.id && meta.Returned {
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
		err = fmt.Errorf("%s: %w", rf.scanHeldWords(cov), engine.ErrHeldElsewhere)
	}
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		gaps := rf.watch.all()
		count := rf.rn.r.Sent - rf.rn.r.Returned
		if u := rf.rn.r.Unseen; u != nil {
			gaps = append(gaps, engine.TapGap{From: u.From, To: u.To})
			if !fresh {
				count = u.Count
			}
		}
		rf.rn.r.Unseen = review.UnseenOf(count, gaps)
		rf.s.base.Warn(rf.id, rf.dlq, "re-read the DLQ for returns while its tap was gone", err)
		return nil
	}
	if n := inDLQ - rf.tapTotal; n > rf.gapExtra {
		for _, f := range extra[:min(len(extra), n-rf.gapExtra)] {
			rf.rn.fail(f)
		}
		rf.rn.r.Returned += n - rf.gapExtra
		rf.gapExtra = n
	}
	rf.rn.r.Unseen = nil
	rf.s.cfg.Log.Info().Str("replay_id", rf.id).Str("dlq", rf.dlq).Str("op", "reconcile tap gap").
		Int("in_dlq", inDLQ).Int("tapped", rf.tapTotal).Int("found_by_reread", rf.gapExtra).
		Msg("re-read the DLQ for the copies that came back while its tap was gone")
	return nil
}

// cameBack words the replay's returns for its final note: the count, and
// for how many copies it could not tell, when it could not.
func (rf *returnsFinder) cameBack() string {
	if rf.rn.r.ReturnsUnverified != "" {
		return rf.rn.jd.unverifiedBack()
	}
	if g := rf.watch.all(); len(g) > 0 && g[len(g)-1].Open() && rf.rn.r.Unseen == nil {
		// Still gone at the end: copies may come back unseen until a
		// check re-reads the DLQ.
		rf.rn.r.Unseen = review.UnseenOf(rf.rn.r.Sent-rf.rn.r.Returned, g)
	}
	if rf.rn.r.Unseen != nil {
		return fmt.Sprintf("%d seen back, %s", rf.rn.r.Returned, rf.rn.r.Unseen.Words())
	}
	return fmt.Sprintf("%d came back", rf.rn.r.Returned)
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
