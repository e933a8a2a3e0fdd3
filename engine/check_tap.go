package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
)

// checkFromTap fills c from the tap's record of r's returns when r's runs
// recorded them there (done is then true): it first records what the tap
// holds now, then reads the record — O(returns), whatever the DLQ's size.
// "Returned" then means the copies that came back, whether or not they are
// still in the DLQ; new failures are the DLQ's arrivals since the replay
// began that are not its returns.
func (s *Service) checkFromTap(ctx context.Context, r Replay, c *CheckReport) (done bool, err error) {
	if !s.tapping() || r.ReturnsMode == ReturnsReread {
		// A replay whose run found the tap blind (see checkBypass) is
		// checked by reading the DLQ.
		return false, nil
	}
	rec, err := s.d.Returns.Returned(ctx, r.ID, -1)
	if err != nil {
		return false, fmt.Errorf("engine: check %s: returns: %w", r.ID, err)
	}
	if !rec.Tapped {
		return false, nil
	}
	// A tap gone since (x-expires) has nothing more to record.
	if _, err := s.recordTap(ctx, r.DLQ); err != nil && !errors.Is(err, ErrQueueNotFound) {
		return true, fmt.Errorf("engine: check %s: %w", r.ID, err)
	}
	if rec, err = s.d.Returns.Returned(ctx, r.ID, -1); err != nil {
		return true, fmt.Errorf("engine: check %s: returns: %w", r.ID, err)
	}
	arrived, err := s.d.Returns.Arrived(ctx, r.DLQ)
	if err != nil {
		return true, fmt.Errorf("engine: check %s: tap arrivals: %w", r.ID, err)
	}
	c.Returned = rec.Total
	c.NewFailures = max(0, int(arrived-rec.Baseline)-rec.Total)
	for _, g := range rec.Groups {
		c.Groups = append(c.Groups, CheckGroup{Group: g.Group, Count: g.Count, ExampleID: g.Example.ID,
			Reason: g.Example.Reason, Example: g.Example.Exception})
	}
	sort.Slice(c.Groups, func(i, j int) bool {
		if c.Groups[i].Count != c.Groups[j].Count {
			return c.Groups[i].Count > c.Groups[j].Count
		}
		return c.Groups[i].Group < c.Groups[j].Group
	})
	for rc, n := range rec.ReplayCounts {
		if rc >= c.ParkAfter {
			c.AtParkLimit += n
		}
	}
	for id, rc := range rec.IDs {
		if rc >= c.ParkAfter {
			c.ParkIDs = append(c.ParkIDs, id)
		}
	}
	sort.Strings(c.ParkIDs)
	if len(c.ParkIDs) > maxParkIDs {
		c.ParkIDs = c.ParkIDs[:maxParkIDs]
	}
	return true, nil
}
