package review

import (
	"context"
	"errors"
	"fmt"
	"github.com/stroma/dlqbot/engine"
	"strings"
	"time"
)

// Reap checks, every interval until ctx ends, for running replays whose
// owner's lease lapsed, and reports each as interrupted (ReapOnce). Every
// process runs a reaper; the atomic transition makes each report happen once.
func (s *Service) Reap(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = s.cfg.LeaseTTL / 3
	}
	for {
		if _, err := s.ReapOnce(ctx); err != nil && ctx.Err() == nil {
			s.Warn("", "", "reap", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.d.Clock.After(every):
		}
	}
}

// ReapOnce marks every running replay that nobody holds a lease on as
// interrupted, freezing what it sent, and returns those it marked. It never
// re-queues them: a replay whose owner died is reported, not re-run. A
// replay it cannot look at is logged and left for the next round.
func (s *Service) ReapOnce(ctx context.Context) ([]engine.Replay, error) {
	ids, err := s.d.Replays.Active(ctx)
	if err != nil {
		return nil, fmt.Errorf("engine: reap: %w", err)
	}
	var out []engine.Replay
	for _, id := range ids {
		r, err := s.d.Replays.Get(ctx, id)
		if err != nil {
			s.Warn(id, "", "reap: read replay", err)
			continue
		}
		if r.State != engine.StateRunning {
			continue
		}
		if h, err := s.d.Leases.Owner(ctx, id); err != nil || h != "" {
			if err != nil {
				s.Warn(id, r.DLQ, "reap: read lease owner", err)
			}
			continue
		}
		// The ledger, not the last progress write, says what was sent.
		sent, pending, err := s.LedgerCounts(ctx, id, nil)
		if err != nil {
			s.Warn(id, r.DLQ, "reap: read ledger", err)
			continue
		}
		rest := ""
		if f, err := s.d.Tokens.LoadHeader(ctx, r.Token); err == nil {
			rest = f.Selection
		} else if !errors.Is(err, engine.ErrTokenNotFound) {
			// Reported all the same, without the hint to preview the rest.
			s.Warn(id, r.DLQ, "reap: load preview", err)
		}
		marked := false
		var after engine.Replay // the record as marked
		err = s.d.Replays.UpdateUnowned(ctx, id, func(cur *engine.Replay) error {
			if cur.State != engine.StateRunning {
				return engine.ErrNoChange
			}
			now := s.d.Clock.Now()
			cur.State, cur.EndedAt, cur.UpdatedAt = engine.StateInterrupted, now, now
			cur.Sent = sent
			cur.Note = fmt.Sprintf("the process running it stopped without releasing it: %d message(s) had been sent", sent)
			if pending > 0 {
				cur.Note += fmt.Sprintf(" and %d more were in flight (they may have been delivered; resume resend=in-doubt is not possible on an interrupted replay, so they are not sent again)", pending)
			}
			cur.Note += fmt.Sprintf("; the rest are still in %s.", cur.DLQ)
			cur.RestSelection = rest
			marked, after = true, *cur
			return nil
		})
		if err != nil && !errors.Is(err, engine.ErrNoChange) {
			// An owner that took the lease meanwhile (a race) lands here
			// too: it runs the replay, so there is nothing to report.
			s.Warn(id, r.DLQ, "reap: mark interrupted", err)
		}
		if err != nil || !marked {
			continue
		}
		if r, err = s.d.Replays.Get(ctx, id); err != nil {
			// Marked: announced from the record as marked, since nobody
			// else will announce it.
			s.Warn(id, after.DLQ, "reap: read interrupted replay", err)
			r = after
		}
		out = append(out, r)
		s.announceInterrupted(ctx, r)
	}
	return out, nil
}

// announceInterrupted emits the interrupted event with the messages sent so
// far (from the ledger, which also lists in-flight copies as pending); the
// selection to preview the rest is the replay's RestSelection.
func (s *Service) announceInterrupted(ctx context.Context, r engine.Replay) {
	if s.d.Notifier == nil {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "replay %s was interrupted: %d sent", r.ID, r.Sent)
	sent := []string{}
	if _, pending, err := s.LedgerCounts(ctx, r.ID, func(e engine.LedgerEntry) {
		if !e.Pending && len(sent) < 20 {
			sent = append(sent, e.ID)
		}
	}); err != nil {
		s.Warn(r.ID, r.DLQ, "announce interrupted: read ledger", err)
	} else {
		if len(sent) > 0 {
			fmt.Fprintf(&b, " (%s", strings.Join(sent, ", "))
			if r.Sent > len(sent) {
				fmt.Fprintf(&b, ", … %d more", r.Sent-len(sent))
			}
			b.WriteString(")")
		}
		if pending > 0 {
			fmt.Fprintf(&b, "; %d copy(ies) in doubt (in flight when it stopped: maybe delivered; listed in the ledger)", pending)
		}
	}
	b.WriteString(".")
	s.d.Notifier.Notify(ctx, engine.Event{Kind: engine.EventInterrupted, Replay: r, Text: b.String(), At: s.d.Clock.Now()})
}
