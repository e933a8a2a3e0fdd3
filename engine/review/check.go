package review

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
)

// maxParkIDs caps the ids a check report lists for parking.
const maxParkIDs = 1000

// Check answers "did the replay work?": it reads the record of the
// DLQ's tap (or, for a replay that had none, the DLQ itself, without
// changing it) and reports how many of the copies the replay sent
// came back (a copy carrying its x-replay-id and a new death), grouped by
// failure, which of those are at the park limit, and — kept apart — how
// many other messages were dead-lettered since the replay started. label
// names a scheduled follow-up ("+5m"), "" for an on-demand check.
func (s *Service) Check(ctx context.Context, replayID, label string) (engine.CheckReport, error) {
	r, err := s.d.Replays.Get(ctx, replayID)
	if err != nil {
		return engine.CheckReport{}, fmt.Errorf("engine: check %s: %w", replayID, err)
	}
	c := engine.CheckReport{ReplayID: r.ID, DLQ: r.DLQ, At: s.d.Clock.Now(), Label: label, ParkAfter: engine.DefaultParkAfter, Groups: []engine.CheckGroup{}}
	previewed := map[string]bool{}
	if f, err := s.d.Tokens.Load(ctx, r.Token); err == nil {
		if f.ParkAfter > 0 {
			c.ParkAfter = f.ParkAfter
		}
		for _, it := range f.Items {
			previewed[it.ID] = true
		}
	} else if !errors.Is(err, engine.ErrTokenNotFound) {
		// Checked all the same, with the default park limit (an expired
		// preview is the usual case and not worth a line).
		s.Warn(r.ID, r.DLQ, "check: load preview", err)
	}
	sent, _, err := s.LedgerCounts(ctx, r.ID, nil)
	if err != nil {
		return c, fmt.Errorf("engine: check %s: ledger: %w", replayID, err)
	}
	c.Replayed = sent
	if done, err := s.checkFromTap(ctx, r, &c); done || err != nil {
		return c, err
	}
	tally := newReturnTally()
	began := s.d.Clock.Now()
	info, err := s.scanWhole(ctx, r.DLQ, "a check of "+r.ID, func(m letter.Message) error {
		meta := s.ViewMeta(r.DLQ, m)
		switch {
		case meta.ReplayID == r.ID && meta.Returned:
			c.Returned++
			tally.Add(meta, c.ParkAfter)
		case meta.ReplayID != r.ID && !previewed[meta.ID] && DiedSince(meta, r.CreatedAt):
			c.NewFailures++
		}
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("engine: check %s: scan %s: %w", replayID, r.DLQ, err)
	}
	c.HeldByReplay = s.heldByReplays(ctx, r.DLQ, began, info.Coverage)
	for _, g := range tally.groups {
		c.Groups = append(c.Groups, *g)
	}
	c.AtParkLimit, c.ParkIDs = tally.atPark, tally.parkIDs
	sortGroups(c.Groups)
	return c, nil
}

// diedSince reports whether m was dead-lettered at or after t, at the
// broker's one-second resolution of death times.
func DiedSince(m letter.Meta, t time.Time) bool {
	d := engine.LatestDeath(m)
	return !d.IsZero() && !d.Before(t.Truncate(time.Second))
}
