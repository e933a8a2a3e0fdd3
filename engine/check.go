package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
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
func (s *Service) Check(ctx context.Context, replayID, label string) (CheckReport, error) {
	r, err := s.d.Replays.Get(ctx, replayID)
	if err != nil {
		return CheckReport{}, fmt.Errorf("engine: check %s: %w", replayID, err)
	}
	c := CheckReport{ReplayID: r.ID, DLQ: r.DLQ, At: s.d.Clock.Now(), Label: label, ParkAfter: DefaultParkAfter, Groups: []CheckGroup{}}
	previewed := map[string]bool{}
	if f, err := s.d.Tokens.Load(ctx, r.Token); err == nil {
		if f.ParkAfter > 0 {
			c.ParkAfter = f.ParkAfter
		}
		for _, it := range f.Items {
			previewed[it.ID] = true
		}
	} else if !errors.Is(err, ErrTokenNotFound) {
		// Checked all the same, with the default park limit (an expired
		// preview is the usual case and not worth a line).
		s.warn(r.ID, r.DLQ, "check: load preview", err)
	}
	entries, err := s.d.Ledger.Entries(ctx, r.ID)
	if err != nil {
		return c, fmt.Errorf("engine: check %s: ledger: %w", replayID, err)
	}
	for _, e := range entries {
		if !e.Pending {
			c.Replayed++
		}
	}
	if done, err := s.checkFromTap(ctx, r, &c); done || err != nil {
		return c, err
	}
	groups := map[string]*CheckGroup{}
	parked := map[string]bool{}
	_, err = s.d.Broker.Scan(ctx, r.DLQ, func(m Message) error {
		meta := s.ParseMeta(r.DLQ, m)
		switch {
		case meta.ReplayID == r.ID && meta.Returned:
			c.Returned++
			g := groups[meta.FailureGroup]
			if g == nil {
				g = &CheckGroup{Group: meta.FailureGroup, ExampleID: meta.ID, Reason: string(meta.Reason), Example: meta.Exception}
				groups[meta.FailureGroup] = g
			}
			g.Count++
			if meta.ReplayCount >= c.ParkAfter {
				c.AtParkLimit++
				if !parked[meta.ID] && len(c.ParkIDs) < maxParkIDs {
					parked[meta.ID] = true
					c.ParkIDs = append(c.ParkIDs, meta.ID)
				}
			}
		case meta.ReplayID != r.ID && !previewed[meta.ID] && diedSince(meta, r.CreatedAt):
			c.NewFailures++
		}
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("engine: check %s: scan %s: %w", replayID, r.DLQ, err)
	}
	for _, g := range groups {
		c.Groups = append(c.Groups, *g)
	}
	sort.Slice(c.Groups, func(i, j int) bool {
		if c.Groups[i].Count != c.Groups[j].Count {
			return c.Groups[i].Count > c.Groups[j].Count
		}
		return c.Groups[i].Group < c.Groups[j].Group
	})
	return c, nil
}
