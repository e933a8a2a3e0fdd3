package replay

import (
	"context"
	"fmt"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/review"

	mrand "math/rand/v2"
	"slices"
	"strings"
	"time"
)

// claimTTL bounds a step's claim on its messages: a run that dies without
// releasing them blocks other replays of the same messages this long at most.
const claimTTL = 15 * time.Minute

// claim claims the step's picked ids for this replay (Deps.Claims) and
// takes out of pick, and out of the plan, those another replay sent or
// is sending: counted in Replay.Elsewhere and named, never missing.
func (ow *ownership) claim(ctx context.Context, pick map[string]int) error {
	if len(pick) == 0 {
		return nil
	}
	ids := make([]string, 0, len(pick))
	for id := range pick {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	// Sends by others since the preview refuse: the approver saw only
	// what was replayed before it.
	refused, err := ow.s.d.Claims.Claim(ctx, ow.dlq, ow.id, ids, ow.rn.f.CreatedAt, claimTTL)
	if err != nil {
		return fmt.Errorf("claim step messages: %w", err)
	}
	// The claimed ids are kept in ids' own array (one list per step, not
	// two: a step may claim a million).
	claimed := ids[:0]
	for _, id := range ids {
		if cl, ok := refused[id]; ok {
			ow.elsewhere(id, pick[id], cl)
			delete(pick, id)
			continue
		}
		claimed = append(claimed, id)
	}
	ow.claimed = claimed
	return nil
}

// elsewhere books n copies of id as another replay's (cl).
func (ow *ownership) elsewhere(id string, n int, cl engine.Claim) {
	ow.rn.plan.Drop(id, n)
	ow.rn.r.Elsewhere += n
	ow.rn.fail(engine.Failure{ID: id, Target: ow.rn.plan.Target(id), Kind: engine.FailureReplayedElsewhere, Detail: cl.Words()})
}

// settleClaims ends the step's claims: what it sent (or may have sent)
// stays this replay's as sent, the rest is released for others.
func (ow *ownership) settleClaims(ctx context.Context, sent *sentSet) {
	if len(ow.claimed) == 0 {
		return
	}
	var done, released []string
	for _, id := range ow.claimed {
		if sent.Has(id) {
			done = append(done, id)
		} else {
			released = append(released, id)
		}
	}
	ow.claimed = ow.claimed[:0]
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := ow.s.d.Claims.Settle(sctx, ow.dlq, ow.id, done, released); err != nil {
		// Claims left behind expire after claimTTL; the ledger holds the truth.
		ow.s.base.Warn(ow.id, ow.dlq, "settle claims", err)
	}
}

// heldBy names who holds messages of the DLQ, for a step that found its
// picks held: dlqbot replays reading it now, a dlqbot preview, approval or
// check reading it now or seen reading it by the step looking for its
// picks ("a preview of U123: dlqbot's own read of orders.dlq"), replays
// seen reading it, and otherwise "another client of orders.dlq". A dlqbot
// read is never called another client.
func (ow *ownership) heldBy(ctx context.Context) string {
	var rs, scans []string
	for _, id := range ow.liveReaders(ctx) {
		if review.IsScanReader(id) {
			scans = append(scans, scanReaderWords(id))
			continue
		}
		rs = append(rs, id)
	}
	for _, w := range ow.sawScans {
		if !slices.Contains(scans, w) {
			scans = append(scans, w)
		}
	}
	dlq := ow.dlq
	switch {
	case len(rs) > 0:
		return "dlqbot replay " + strings.Join(rs, ", ") + " (sending from " + dlq + ")"
	case len(scans) > 0:
		return strings.Join(scans, ", ") + " (dlqbot's own read of " + dlq + ", not another client)"
	case len(ow.sawReaders) > 0:
		// Seen reading by the step looking for its picks, ended since.
		return "dlqbot replay " + strings.Join(ow.sawReaders, ", ") + " (which was sending from " + dlq + ")"
	}
	return "another client of " + dlq
}

// replaysReading reports whether another dlqbot replay (not a preview,
// approval or check) reads the DLQ now: its picks may be what this run's
// cursor holds.
func (ow *ownership) replaysReading(ctx context.Context) bool {
	for _, id := range ow.liveReaders(ctx) {
		if !review.IsScanReader(id) {
			return true
		}
	}
	return false
}

// liveReaders lists the other dlqbot replays that may hold messages of the
// DLQ unacked now: those with unexpired claims on it (a step in flight)
// or an unexpired reading mark (an open cursor, a step seeking its picks:
// readers.go) whose record says running. A claim left behind by a replay that ended
// (its settle failed) holds nothing, and a running replay whose owner died
// is reported interrupted by the reaper within the lease time. A record
// that cannot be read counts as running: waiting is safe, a false "held
// by another client" is not.
func (ow *ownership) liveReaders(ctx context.Context) []string {
	rs, err := ow.s.d.Claims.Readers(ctx, ow.dlq, ow.id)
	if err != nil {
		ow.s.base.Warn(ow.id, ow.dlq, "claim readers", err)
		return nil
	}
	live := rs[:0]
	for _, id := range rs {
		r, err := ow.s.d.Replays.Get(ctx, id)
		if err == nil && r.State != engine.StateRunning {
			continue
		}
		live = append(live, id)
	}
	return live
}

// readDuring reports whether another dlqbot replay (or a whole read of a
// preview or check) had a reading mark on the DLQ at any moment since:
// its read may have held this step's picks and let them go in between
// two looks at the broker. A failed look is logged and counts as none,
// as in liveReaders.
func (ow *ownership) readDuring(ctx context.Context, since time.Time) bool {
	rs, err := ow.s.d.Claims.ReadSince(ctx, ow.dlq, ow.id, since)
	if err != nil {
		ow.s.base.Warn(ow.id, ow.dlq, "readers since", err)
		return false
	}
	return len(rs) > 0
}

// readerSlice is how long a step looking for its picked messages waits
// for a quiet DLQ before it looks at who holds them.
func (ow *ownership) readerSlice() time.Duration {
	return min(ow.s.cfg.Tune.HeldWait, 2*ow.s.cfg.Tune.StatsLag)
}

// readerWait decides, after a wait for a quiet DLQ ended without one,
// what a step still looking for picked messages does. While another
// dlqbot replay reads the DLQ (liveReaders), its reader can hold this
// step's picks unacked while it scans for its own, however often: that is
// never "held by another client". The step then keeps waiting for as long
// as such a reader exists and Config.Tune.HeldWait after the last one was seen
// (deadline moves), and reads again (again) once a slice with some jitter
// passed since its last pass, so two replays reading at once do not keep
// meeting. Those picks are this step's (it claimed them): the other
// replay gives them back at the end of its read. Without a dlqbot reader
// it waits until deadline (ok false then: held by another client).
func (ow *ownership) readerWait(ctx context.Context, deadline *time.Time, passEnd time.Time) (again, ok bool) {
	now := ow.s.d.Clock.Now()
	ow.markReading(ctx, true) // still seeking: refreshed
	live := ow.liveReaders(ctx)
	if len(live) == 0 {
		return false, now.Before(*deadline)
	}
	for _, id := range live {
		switch {
		case review.IsScanReader(id):
			if w := scanReaderWords(id); !slices.Contains(ow.sawScans, w) {
				ow.sawScans = append(ow.sawScans, w)
			}
		case !slices.Contains(ow.sawReaders, id):
			ow.sawReaders = append(ow.sawReaders, id)
		}
	}
	*deadline = now.Add(ow.s.cfg.Tune.HeldWait)
	jitter := time.Duration(mrand.Int64N(int64(ow.readerSlice()) + 1))
	return now.Sub(passEnd) >= ow.readerSlice()+jitter, true
}

// others takes out of pick what another replay holds now, before it could
// be called missing: reports how many copies it took.
func (ow *ownership) others(ctx context.Context, pick map[string]int) int {
	var ids []string
	for id, n := range pick {
		if n > 0 {
			ids = append(ids, id)
		}
	}
	h, err := ow.s.d.Claims.Holders(ctx, ow.dlq, ow.id, ids)
	if err != nil {
		ow.s.base.Warn(ow.id, ow.dlq, "claim holders", err)
		return 0
	}
	took := 0
	for id, cl := range h {
		ow.elsewhere(id, pick[id], cl)
		took += pick[id]
		pick[id] = 0
	}
	return took
}

// ownRest owns, beside the run, the previewed messages r's approval left
// to its runs (r.OwnFrom on), and returns a wait for it to end: a run
// waits before it lets its lease go, so a paused replay owns all it
// planned. Every run does it again (a resume after a crash): owning what
// one owns already changes nothing. Until it is done another replay
// approved meanwhile may own some of the rest first; then this one leaves
// those to it ("left to r_…"), each id still sent by one replay only,
// since every step claims its picks before it sends them. items are the
// previewed ids in DLQ order (the run's plan's), read and never changed.
func (s *Service) ownRest(ctx context.Context, f engine.Frozen, r engine.Replay, items []string) (wait func()) {
	if r.OwnFrom <= 0 || r.OwnFrom >= len(items) {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ids := items[r.OwnFrom:] // read only
		refused, _, err := s.d.Claims.Own(ctx, f.DLQ, r.ID, ids, f.CreatedAt, false, nil)
		if err == nil && len(refused) > 0 {
			// Owned by replays that ended: theirs lapsed, so these are
			// this replay's too.
			var live map[string]engine.Claim
			var lapsed []string
			if live, lapsed, err = s.base.LiveHolders(ctx, refused); err == nil && len(lapsed) > 0 {
				var again []string
				for id := range refused {
					if _, ok := live[id]; !ok {
						again = append(again, id)
					}
				}
				var taken map[string]engine.Claim
				_, taken, err = s.d.Claims.Own(ctx, f.DLQ, r.ID, again, f.CreatedAt, false, lapsed)
				if err == nil && len(taken) > 0 {
					// Taken from replays that stopped or ended: their
					// records say so (this run's record counts only what
					// its approval took, TakenFrom).
					by := map[string]int{}
					for _, cl := range taken {
						by[cl.Replay]++
					}
					s.base.LeftTo(ctx, engine.Replay{ID: r.ID, DLQ: f.DLQ, TakenFrom: by})
				}
			}
		}
		if err != nil && ctx.Err() == nil {
			s.base.Warn(r.ID, f.DLQ, "own the rest of the previewed messages", err)
		}
	}()
	return func() { <-done }
}
