package review

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
)

// checkFromTap fills c from the tap's record of r's returns when r's runs
// recorded them there (done is then true): it first records what the tap
// holds now, then reads the record — O(returns), whatever the DLQ's size.
// "Returned" then means the copies that came back, whether or not they are
// still in the DLQ; new failures are the DLQ's arrivals since the replay
// began that are not its returns.
func (s *Service) checkFromTap(ctx context.Context, r engine.Replay, c *engine.CheckReport) (done bool, err error) {
	if r.ReturnsMode == engine.ReturnsReread {
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
	// A tap gone since (deleted, or x-expires) has nothing more to
	// record: the window without it is recorded, and it is declared again
	// so that later follow-ups count exactly from now on.
	var noticed []engine.TapGap
	if _, err := s.RecordTap(ctx, r.DLQ); errors.Is(err, engine.ErrQueueNotFound) {
		gap := engine.TapGap{From: s.LastSawTap(r.DLQ, r.CreatedAt)}
		s.AddGap(ctx, r.ID, r.DLQ, gap)
		if to, err := s.RedeclareTap(ctx, r.DLQ); err == nil {
			gap.To = to
			s.AddGap(ctx, r.ID, r.DLQ, gap)
		} else {
			s.Warn(r.ID, r.DLQ, "check: declare missing tap again", err) // the window stays open
		}
		noticed = append(noticed, gap)
	} else if err != nil {
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
		typ := g.Example.Type
		if typ == "" {
			typ = letter.GroupType(g.Group, g.Example.Reason)
		}
		c.Groups = append(c.Groups, engine.CheckGroup{Group: g.Group, Type: typ, Count: g.Count, ExampleID: g.Example.ID,
			Reason: g.Example.Reason, Example: g.Example.Exception})
	}
	sortGroups(c.Groups)
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
	if gaps := append(s.gapsOf(ctx, r), noticed...); len(gaps) > 0 {
		return true, s.reconcileCheck(ctx, r, gaps, c)
	}
	return true, nil
}

// gapsOf lists the windows without r's tap since r began: those the store
// recorded for its DLQ, and the one its last run could not reconcile.
func (s *Service) gapsOf(ctx context.Context, r engine.Replay) []engine.TapGap {
	var out []engine.TapGap
	gaps, err := s.d.TapGaps.TapGaps(ctx, r.DLQ)
	if err != nil {
		// Without the record, the check cannot know the tap was
		// gone: say so in the log (the run's own record still counts).
		s.Warn(r.ID, r.DLQ, "check: read tap gaps", err)
	}
	for _, g := range gaps {
		if g.Touches(r.CreatedAt, time.Time{}) {
			out = append(out, g)
		}
	}
	if u := r.Unseen; u != nil {
		out = append(out, engine.TapGap{From: u.From, To: u.To})
	}
	return out
}

// reconcileCheck completes c after windows without the tap: a counted
// re-read of the DLQ finds the copies of r that came back, and per failure
// group the larger of what the tap recorded and what the DLQ holds is
// counted (each is a lower bound of the truth: the tap missed the
// window, the DLQ lost what left it since). When the read is impossible
// (refused by the read budget) c says for how many copies it could not
// tell, and when the tap was gone.
func (s *Service) reconcileCheck(ctx context.Context, r engine.Replay, gaps []engine.TapGap, c *engine.CheckReport) error {
	tally := newReturnTally()
	groups := tally.groups
	_, err := s.scanWhole(ctx, r.DLQ, "a check of "+r.ID, func(m letter.Message) error {
		meta := s.ViewMeta(r.DLQ, m)
		if meta.ReplayID == r.ID && meta.Returned {
			tally.Add(meta, c.ParkAfter)
		}
		return nil
	})
	if errors.Is(err, engine.ErrReadBudget) || errors.Is(err, engine.ErrBudgetUnknown) {
		u := UnseenOf(0, gaps)
		sent := 0
		if _, _, lerr := s.LedgerCounts(ctx, r.ID, func(e engine.LedgerEntry) {
			if !e.Pending && (u.To.IsZero() || e.At.Before(u.To)) {
				sent++
			}
		}); lerr != nil {
			return fmt.Errorf("engine: check %s: ledger: %w", r.ID, lerr)
		}
		u.Count = max(0, sent-c.Returned)
		c.Unseen = u
		s.Warn(r.ID, r.DLQ, "check: re-read the DLQ for returns while its tap was gone", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("engine: check %s: re-read %s for returns while its tap was gone: %w", r.ID, r.DLQ, err)
	}
	total := 0
	for i := range c.Groups {
		if g := groups[c.Groups[i].Group]; g != nil {
			c.Groups[i].Count = max(c.Groups[i].Count, g.Count)
			delete(groups, c.Groups[i].Group)
		}
	}
	for _, g := range groups {
		c.Groups = append(c.Groups, *g)
	}
	for _, g := range c.Groups {
		total += g.Count
	}
	c.Returned = max(c.Returned, total)
	c.AtParkLimit = max(c.AtParkLimit, tally.atPark)
	for _, id := range tally.parkIDs {
		if !slices.Contains(c.ParkIDs, id) && len(c.ParkIDs) < maxParkIDs {
			c.ParkIDs = append(c.ParkIDs, id)
		}
	}
	sort.Strings(c.ParkIDs)
	sortGroups(c.Groups)
	return nil
}

// sortGroups orders groups largest first, then by name.
func sortGroups(gs []engine.CheckGroup) {
	sort.Slice(gs, func(i, j int) bool {
		if gs[i].Count != gs[j].Count {
			return gs[i].Count > gs[j].Count
		}
		return gs[i].Group < gs[j].Group
	})
}

// returnTally counts a replay's copies found back in its DLQ by failure
// group (the first copy of a group is its example) and those at the park
// limit, keeping at most maxParkIDs of their ids.
type returnTally struct {
	groups  map[string]*engine.CheckGroup
	parked  map[string]bool
	parkIDs []string
	atPark  int
}

func newReturnTally() *returnTally {
	return &returnTally{groups: map[string]*engine.CheckGroup{}, parked: map[string]bool{}}
}

// add counts one returned copy (meta); parkAfter is the park limit.
func (t *returnTally) Add(meta letter.Meta, parkAfter int) {
	g := t.groups[meta.FailureGroup]
	if g == nil {
		g = &engine.CheckGroup{Group: meta.FailureGroup, Type: letter.FailureType(meta.ExceptionType, meta.Exception, meta.Reason), ExampleID: meta.ID, Reason: string(meta.Reason), Example: meta.Exception}
		t.groups[meta.FailureGroup] = g
	}
	g.Count++
	if meta.ReplayCount < parkAfter {
		return
	}
	t.atPark++
	if !t.parked[meta.ID] && len(t.parkIDs) < maxParkIDs {
		t.parked[meta.ID] = true
		t.parkIDs = append(t.parkIDs, meta.ID)
	}
}

// unseenOf is the Unseen of count copies over gaps (nil when gaps is
// empty): from the earliest start to the latest end, open when any is.
func UnseenOf(count int, gaps []engine.TapGap) *engine.Unseen {
	if len(gaps) == 0 {
		return nil
	}
	u := &engine.Unseen{Count: max(0, count), From: gaps[0].From}
	open := false
	for _, g := range gaps {
		if g.From.Before(u.From) {
			u.From = g.From
		}
		open = open || g.Open()
		if g.To.After(u.To) {
			u.To = g.To
		}
	}
	if open {
		u.To = time.Time{}
	}
	return u
}
