package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stroma/dlqbot/engine/letter"
)

// Two replays of one DLQ read it at once, and each read holds what it
// passed unacknowledged, invisible to the other (cursor.go). So that one
// replay never takes the other's read for "another client" holding its
// picks, and never waits on it for long, each marks itself in the store
// (Claims.Reading) while a read of its holds messages:
//
//   - a cursor open between steps marks the replay a reader, refreshed
//     while it settles; a replay looking for picks it did not find waits
//     for such a reader as for one with claims (readerWait), never
//     calling its picks held by another client;
//   - a step that did not find all its picks (findRest) marks the replay
//     seeking; a settling replay whose cursor is open looks for seekers
//     every markEvery and gives back what its cursor holds when there is
//     one, so the seeker's next read finds its picks. A replay sending a
//     step does the same from its move (giveway.go): the move stops, its
//     read gives back what it passed, and the step moves on once the
//     seeker has stopped seeking, or after giveWayFor;
//   - a run's own re-reads of the DLQ (for returns, a bypass check, the
//     reconcile after a lost connection, the acks it did not carry) mark
//     the replay reading while they read, and seeking when another
//     replay's read cut them short (settle_scan.go), so that replay's
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
const markEvery = 2 * time.Second

// markReading marks the run reading its DLQ (seeking: looking for picks)
// until a lease time from now.
func (rn *run) markReading(ctx context.Context, seeking bool) {
	if rn.s.d.Claims == nil {
		return
	}
	rn.marked, rn.markedSeeking = rn.s.d.Clock.Now(), seeking
	held := 0
	if rn.cur != nil {
		// What a preview beside it cannot see (heldByReplays), as of the
		// last step's end: Cursor.Held waits for a move in progress, and
		// a mark is refreshed from within one (progress).
		held = rn.curHeld
	}
	if err := rn.s.d.Claims.Reading(ctx, rn.r.DLQ, rn.r.ID, seeking, held, rn.s.cfg.LeaseTTL); err != nil {
		rn.warn("mark reading", err)
	}
}

// doneReading removes the run's mark, or turns a seeking mark back into a
// reader's while its cursor is open. A mark left by a run shutting down
// expires after the lease time (waiting on it is safe, and the drain on
// SIGTERM gets no longer).
func (rn *run) doneReading(ctx context.Context) {
	if rn.s.d.Claims == nil {
		return
	}
	if rn.cur != nil {
		rn.markReading(ctx, false)
		return
	}
	if ctx.Err() != nil {
		return // shutting down: the mark expires after the lease time
	}
	if err := rn.s.d.Claims.DoneReading(ctx, rn.r.DLQ, rn.r.ID); err != nil {
		rn.warn("unmark reading", err)
	}
}

// yieldCursor is called by a settling step: every markEvery while the
// run's cursor is open, it refreshes the run's mark, and releases the
// cursor when another replay seeks picks on the DLQ (the bypass check
// allows for what the cursor held being ready again: see bypassBase).
func (rn *run) yieldCursor(ctx context.Context) {
	if rn.cur == nil || rn.s.d.Claims == nil || rn.s.d.Clock.Now().Sub(rn.marked) < markEvery {
		return
	}
	seekers, err := rn.s.d.Claims.Seekers(ctx, rn.r.DLQ, rn.r.ID)
	if err != nil {
		rn.warn("seekers", err)
	}
	if len(seekers) == 0 {
		rn.markReading(ctx, false)
		return
	}
	rn.releaseCursor("dlqbot " + strings.Join(seekers, ", ") + " looks for messages it may hold")
}

// scanReaderPrefix starts the reader id a scanWhole marks itself with:
// "read_<16 hex> <who reads>", e.g. "read_… a preview of U123".
const scanReaderPrefix = "read_"

// scanReaderID is the reader id of a whole read that who describes ("a
// preview of U123").
func scanReaderID(who string) string { return NewID(scanReaderPrefix) + " " + who }

// scanReaderWords is who a whole read's reader id describes ("a preview of
// U123"), or "a dlqbot preview, approval or check" for an id without.
func scanReaderWords(id string) string {
	if _, who, ok := strings.Cut(id, " "); ok && who != "" {
		return who
	}
	return "a dlqbot preview, approval or check"
}

// isScanReader reports whether a reader id is a whole read's (scanWhole),
// not a replay's.
func isScanReader(id string) bool { return strings.HasPrefix(id, scanReaderPrefix) }

// scanWhole is Broker.Scan of dlq for a read that must see the whole DLQ
// (a preview, an approval's compare, a check; who says which, and for
// whom: "a preview of U123"). It marks itself reading for as long as it
// reads, so that a replay whose picks it holds waits for it, names it, and
// never takes it for another client (readerWait, heldBy). It does not wait
// for what dlqbot replays' reads hold, and replays do not give way to it:
// what a replay's cursor or step holds is not seen, and heldByReplays
// names that replay. So neither waits for the other longer than the
// other's read lasts.
func (s *Service) scanWhole(ctx context.Context, dlq, who string, visit func(letter.Message) error) (ScanInfo, error) {
	if s.d.Claims == nil {
		return s.d.Broker.Scan(ctx, dlq, visit)
	}
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
			case <-s.d.Clock.After(markEvery):
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
	return s.d.Broker.Scan(ctx, dlq, visit)
}

// heldByReplays names the dlqbot replays whose reads may have held
// messages of dlq that a whole read begun at since could not see (cov):
// replays reading it since then (a cursor, a step looking for its picks)
// or sending a step from it now. Messages is cov.HeldElsewhere (0 when the
// broker could not tell how many another consumer held). nil when the
// read was not short of other readers or no replay was reading: then the
// holder, if any, is another client.
func (s *Service) heldByReplays(ctx context.Context, dlq string, since time.Time, cov Coverage) *HeldBy {
	if s.d.Claims == nil || cov.HeldElsewhere == 0 && cov.OtherConsumers == 0 && !cov.Short {
		return nil
	}
	var rs []string
	add := func(ids []string) {
		for _, id := range ids {
			if !isScanReader(id) && !slices.Contains(rs, id) {
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
	h := &HeldBy{Replays: rs, Messages: cov.HeldElsewhere}
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

// Who names the replays: "replay r_…" or "replays r_…, r_…".
func (h HeldBy) Who() string {
	if len(h.Replays) == 1 {
		return "replay " + h.Replays[0]
	}
	return "replays " + strings.Join(h.Replays, ", ")
}

// Words says what the replays held: "40 held by replay r_…" ("messages
// held by replays r_…, r_…" when the count is not known).
func (h HeldBy) Words() string {
	who := h.Who()
	if h.Messages == 0 {
		return "messages held by " + who
	}
	return fmt.Sprintf("%d held by %s", h.Messages, who)
}

// HeldBy is how many messages of a DLQ a read (a preview, a compare, a
// check) could not see while dlqbot replays' reads held messages of it,
// and which replays those were.
type HeldBy struct {
	Replays  []string `json:"replay_ids"`
	Messages int      `json:"messages"`
}
