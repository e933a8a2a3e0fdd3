package review

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
)

// Two replays of one DLQ read it at once, and each read holds what it
// passed unacknowledged, invisible to the other (engine/cursor.go). So that one
// replay never takes the other's read for "another client" holding its
// picks, and never waits on it for long, each marks itself in the store
// (Claims.Reading) while a read of its holds messages:
//
//   - a cursor open between steps marks the replay a reader, refreshed
//     while it settles; a replay looking for picks it did not find waits
//     for such a reader as for one with claims (readerWait), never calling
//     its picks held by another client;
//   - a step that did not find all its picks (findRest), and a step
//     resending copies in doubt while it looks for their originals
//     (engine/replay/resend.go), marks the replay seeking; a settling
//     replay whose cursor is open looks for seekers every markEvery and
//     gives back what its cursor holds when there is one, so the seeker's
//     next read finds its picks. A replay sending a step does the same from
//     its move (engine/replay/giveway.go): the move stops, its read gives
//     back what it passed, and the step moves on once the seeker has
//     stopped seeking, or after giveWayFor;
//   - a run's own re-reads of the DLQ (for returns, a bypass check, the
//     reconcile after a lost connection, the acks it did not carry) mark
//     the replay reading while they read, and seeking when another replay's
//     read cut them short (engine/replay/settle_scan.go), so that replay's
//     step gives way to them as well.
//
// A whole read of the DLQ (a preview, an approval's compare, a check:
// scanWhole) marks itself reading as well, for as long as it reads, but
// never seeking: no replay gives its cursor back for it, and it does not
// wait for what a replay's read holds (heldByReplays counts that, naming
// the replay). A step whose picks such a read holds waits for as long as
// its mark lasts and names it ("a preview of U123"), never "another
// client" (heldBy).
//
// Marks expire after the lease time, so a reader that died leaves none
// for long.

// markEvery is how often a settling replay with an open cursor refreshes
// its mark and looks for seekers.
const MarkEvery = 2 * time.Second

// scanReaderPrefix starts the reader id a scanWhole marks itself with:
// "read_<16 hex> <who reads>", e.g. "read_… a preview of U123".
const scanReaderPrefix = "read_"

// scanReaderID is the reader id of a whole read that who describes ("a
// preview of U123").
func scanReaderID(who string) string { return engine.NewID(scanReaderPrefix) + " " + who }

// isScanReader reports whether a reader id is a whole read's (scanWhole),
// not a replay's.
func IsScanReader(id string) bool { return strings.HasPrefix(id, scanReaderPrefix) }

// scanWhole is Broker.Scan of dlq for a read that must see the whole DLQ
// (a preview, an approval's compare, a check; who says which, and for
// whom: "a preview of U123"). It marks itself reading for as long as it
// reads, so that a replay whose picks it holds waits for it, names it, and
// never takes it for another client (readerWait, heldBy). It does not wait
// for what dlqbot replays' reads hold, and replays do not give way to it:
// what a replay's cursor or step holds is not seen, and heldByReplays
// names that replay. So neither waits for the other longer than the
// other's read lasts.
func (s *Service) scanWhole(ctx context.Context, dlq, who string, visit func(letter.Message) error) (engine.ScanInfo, error) {
	info, _, err := s.scanKeeping(ctx, dlq, who, "", visit)
	return info, err
}

// scanKeeping is scanWhole that, given a key, a broker that keeps reads
// (engine.ReadKeeper) and Config.Tune.KeepReads, keeps the read for the
// run of the replay key names when the broker can (kept): an approval's
// compare, whose run then does not read the DLQ again. A kept read nobody
// takes is given back after keptReadTTL.
func (s *Service) scanKeeping(ctx context.Context, dlq, who, key string, visit func(letter.Message) error) (info engine.ScanInfo, kept bool, err error) {
	self := scanReaderID(who)
	mark := func(c context.Context) {
		if err := s.d.Claims.Reading(c, dlq, self, false, 0, s.cfg.LeaseTTL); err != nil && c.Err() == nil {
			s.cfg.Log.Warn().Err(err).Str("dlq", dlq).Msg("mark reading")
		}
	}
	mark(ctx)
	// The mark is refreshed while the read lasts (a read of a large DLQ
	// outlasts the lease time); one left by a process that died expires.
	rctx, stop := context.WithCancel(ctx)
	refreshed := make(chan struct{})
	go func() {
		defer close(refreshed)
		for {
			select {
			case <-rctx.Done():
				return
			case <-s.d.Clock.After(MarkEvery):
				mark(rctx)
			}
		}
	}()
	defer func() {
		stop()
		<-refreshed
		if ctx.Err() == nil { // else the mark expires after the lease time
			_ = s.d.Claims.DoneReading(ctx, dlq, self)
		}
	}()
	if k, ok := s.d.Broker.(engine.ReadKeeper); ok && key != "" && s.cfg.Tune.KeepReads {
		return k.ScanKeep(ctx, dlq, key, keptReadTTL, visit)
	}
	info, err = s.d.Broker.Scan(ctx, dlq, visit)
	return info, false, err
}

// keptReadTTL is how long an approval's kept read waits for its run
// (scanKeeping): the run of a replay approved to run here begins within
// moments; one handed to the workers, paused or cancelled gives the read
// back at once (DropKept).
const keptReadTTL = 5 * time.Second

// DropKept gives back the read an approval kept for replay id's run, if
// any: the run will not take it (it was handed to the workers, which may
// run in another process, or it reads without a cursor).
func (s *Service) DropKept(id string) {
	if k, ok := s.d.Broker.(engine.ReadKeeper); ok {
		k.DropKept(id)
	}
}

// heldByReplays names the dlqbot replays whose reads may have held
// messages of dlq that a whole read begun at since could not see (cov):
// replays reading it since then (a cursor, a step looking for its picks)
// or sending a step from it now. Messages is cov.HeldElsewhere (0 when the
// broker could not tell how many another consumer held). nil when the
// read was not short of other readers or no replay was reading: then the
// holder, if any, is another client.
func (s *Service) heldByReplays(ctx context.Context, dlq string, since time.Time, cov engine.Coverage) *engine.HeldBy {
	if cov.HeldElsewhere == 0 && cov.OtherConsumers == 0 && !cov.Short {
		return nil
	}
	var rs []string
	add := func(ids []string) {
		for _, id := range ids {
			if !IsScanReader(id) && !slices.Contains(rs, id) {
				rs = append(rs, id)
			}
		}
	}
	if ids, err := s.d.Claims.ReadSince(ctx, dlq, "", since); err == nil {
		add(ids)
	}
	if ids, err := s.d.Claims.Readers(ctx, dlq, ""); err == nil {
		add(ids)
	}
	if len(rs) == 0 {
		return nil
	}
	slices.Sort(rs)
	h := &engine.HeldBy{Replays: rs, Messages: cov.HeldElsewhere}
	// What their cursors said they hold is exact where the broker's
	// statistics lag (or were not asked).
	if counts, err := s.d.Claims.Holding(ctx, dlq); err == nil {
		n := 0
		for _, id := range rs {
			n += counts[id]
		}
		h.Messages = max(h.Messages, n)
	}
	return h
}

// awaitQuiet polls until no other client holds messages of dlq, as the
// broker reports it: no consumer (passive declare, exact) and, when
// strict, no unacknowledged message in a management sample that reflects
// a moment after since (its statistics lag by Config.Tune.StatsLag). It
// returns false when deadline passes first, or when stop (if set) says to
// stop. A failed read of the management statistics counts as not quiet
// (logged for replay, when set), except that a strict wait for a replay
// ends at once with ErrManagementDown when the API is not answering.
func (s *Base) AwaitQuiet(ctx context.Context, replay, dlq string, since, deadline time.Time, strict bool, stop func() error) (bool, error) {
	for {
		if stop != nil && stop() != nil {
			return false, nil
		}
		st, err := s.d.Broker.Inspect(ctx, dlq)
		if err != nil {
			return false, err
		}
		if !st.Exists {
			return false, fmt.Errorf("%s: %w", dlq, engine.ErrQueueNotFound)
		}
		if st.Consumers == 0 {
			if !strict {
				return true, nil
			}
			cs, err := s.d.Counters.Counters(ctx, dlq)
			if err != nil && replay != "" && errors.Is(err, engine.ErrManagementDown) {
				// Only the API's counts prove that no client holds a
				// message: a run does not wait on an API that does not
				// answer (engine/replay/settle_api.go).
				return false, err
			}
			if err != nil {
				s.Warn(replay, dlq, "read dlq counters", err)
			} else if !cs.SampledAt.IsZero() && cs.SampledAt.After(since.Add(s.cfg.Tune.StatsLag)) && cs.Unacked == 0 && cs.Consumers == 0 {
				return true, nil
			}
		}
		if s.d.Clock.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-s.d.Clock.After(s.cfg.SettlePoll):
		}
	}
}
