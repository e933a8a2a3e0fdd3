package review

import (
	"context"
	"errors"
	"fmt"
	"github.com/stroma/dlqbot/engine"
	"maps"
	"slices"
	"time"
)

// An approval reads from the store what other dlqbot replays did with the
// previewed ids while the broker proves the DLQ unchanged: the ledger's
// history and the claims each take Redis work per id (about 0.1 s for
// both at 100,000 ids on this machine, growing with the preview), the
// proof a few management API calls (0.6 s, seconds on a loaded broker);
// neither needs the other.
//
// Most often no other replay touched the DLQ since the preview, and the
// claims' summary (Claims.Summary: per replay, its last write and its
// latest claim) proves it in one read whatever the preview's size: then
// nothing is read per id (a second or more at 1,000,000 ids).

// otherReplays is what the store says other dlqbot replays did with the
// previewed ids: the ledger's sends (hist), the live claims (held) and the
// replays whose ownership lapsed.
type otherReplays struct {
	hist   map[string][]engine.Sent
	held   map[string]engine.Claim
	lapsed []string
	err    error
}

// othersAsync reads otherReplays for f's ids (items) in the background;
// the channel yields it once.
func (s *Service) othersAsync(ctx context.Context, f engine.Frozen, items *previewItems) <-chan otherReplays {
	out := make(chan otherReplays, 1)
	go func() {
		if lapsed, ok := s.quietElsewhere(ctx, f); ok {
			out <- otherReplays{hist: map[string][]engine.Sent{}, held: map[string]engine.Claim{}, lapsed: lapsed}
			return
		}
		ids, err := items.loadIDs(ctx)
		if err != nil {
			out <- otherReplays{err: err}
			return
		}
		// One after the other, in chunks: Redis runs one command at a
		// time, and a read of 100,000 ids in one command (or queued
		// behind another's) took past the client's read timeout on a
		// loaded machine ("i/o timeout": the approval failed).
		o := otherReplays{hist: map[string][]engine.Sent{}, held: map[string]engine.Claim{}}
		for start := 0; start < len(ids) && o.err == nil; start += storeChunk {
			chunk := ids[start:min(len(ids), start+storeChunk)]
			hist, err := s.d.Ledger.History(ctx, f.DLQ, chunk)
			if err != nil {
				o.err = fmt.Errorf("history: %w", err)
				break
			}
			maps.Copy(o.hist, hist)
			held, err := s.d.Claims.Holders(ctx, f.DLQ, "", chunk)
			if err != nil {
				o.err = fmt.Errorf("claims: %w", err)
				break
			}
			maps.Copy(o.held, held)
		}
		if o.err == nil && len(o.held) > 0 {
			var err error
			if o.held, o.lapsed, err = s.LiveHolders(ctx, o.held); err != nil {
				o.err = fmt.Errorf("claims: %w", err)
			}
		}
		out <- o
	}()
	return out
}

// storeChunk is how many ids an approval asks the store about at once.
const storeChunk = 10000

// copiesOf is how many copies of each id in hist or held the preview
// selected: a map of those few ids, not of the whole preview.
func copiesOf(items []engine.Item, hist map[string][]engine.Sent, held map[string]engine.Claim) map[string]int {
	out := make(map[string]int, len(hist)+len(held))
	if len(hist)+len(held) == 0 {
		return out
	}
	for _, it := range items {
		_, h := hist[it.ID]
		_, c := held[it.ID]
		if h || c {
			out[it.ID] = it.Count
		}
	}
	return out
}

// summarySkew is how much earlier than the preview the summary's last
// writes must be: they are in milliseconds, by the clocks of whichever
// processes wrote them.
const summarySkew = 5 * time.Second

// quietElsewhere reports, from the claims' summary alone, that no other
// replay holds or sent any id of f's DLQ since its preview: every replay
// the summary names last wrote before the preview was made and has ended
// or stopped (its ownership lapsed: those are returned) with no claim
// left running.
// Every send is claimed first, so a send after the preview would show as
// a later write. A summary the store does not know (claims written before
// it kept one) or any replay still live is false: read per id then.
func (s *Service) quietElsewhere(ctx context.Context, f engine.Frozen) (lapsed []string, ok bool) {
	by, known, err := s.d.Claims.Summary(ctx, f.DLQ)
	if err != nil || !known {
		return nil, false
	}
	now := s.d.Clock.Now()
	before := f.CreatedAt.Add(-summarySkew)
	for _, b := range by {
		if !b.LastWrite.Before(before) {
			return nil, false
		}
		// A run settles its claims before it ends (finished, or
		// cancelled); one the reaper ended (interrupted) or whose record
		// is gone may have left claims, which count until they expire.
		r, err := s.d.Replays.Get(ctx, b.Replay)
		switch {
		case errors.Is(err, engine.ErrReplayNotFound) || (err == nil && r.State == engine.StateInterrupted):
			if b.ClaimsUntil.After(now) {
				return nil, false
			}
		case err != nil || !r.State.Yields():
			return nil, false
		}
		lapsed = append(lapsed, b.Replay)
	}
	slices.Sort(lapsed)
	return lapsed, true
}
