package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine/letter"
)

// DefaultTapPoll is how often a worker drains every registered tap.
const DefaultTapPoll = time.Second

// tapping reports whether returns can be found through taps at all (the
// broker adapter and the store both support them).
func (s *Service) tapping() bool { return s.d.Taps != nil && s.d.Returns != nil }

// recordTap drains dlq's tap into the store: every message is an arrival
// in the DLQ, and one that carries a replay id and a new death is a return
// of that replay. It returns how many messages it recorded.
func (s *Service) recordTap(ctx context.Context, dlq string) (int, error) {
	if !s.tapping() {
		return 0, nil
	}
	n, err := s.d.Taps.DrainTap(ctx, dlq, func(ms []letter.Message) error { return s.recordBatch(ctx, dlq, ms) })
	if err != nil {
		return n, fmt.Errorf("engine: record tap of %s: %w", dlq, err)
	}
	s.sawTap(dlq)
	return n, nil
}

// recordBatch records one batch of dlq's tap: every message is an
// arrival, and one with a replay id and a new death a return.
func (s *Service) recordBatch(ctx context.Context, dlq string, ms []letter.Message) error {
	var evs []ReturnEvent
	now := s.d.Clock.Now()
	for _, m := range ms {
		meta := s.viewMeta(dlq, m)
		if meta.ReplayID == "" || !meta.Returned {
			continue
		}
		at := latestDeath(meta)
		if at.IsZero() {
			at = now
		}
		evs = append(evs, ReturnEvent{
			ReplayID: meta.ReplayID, ID: meta.ID, Source: meta.Source, Group: meta.FailureGroup,
			Type:   letter.FailureType(meta.ExceptionType, meta.Exception, meta.Reason),
			Reason: string(meta.Reason), Exception: meta.Exception, ReplayCount: meta.ReplayCount,
			At: at, Redelivered: m.Redelivered,
		})
	}
	return s.d.Returns.Record(ctx, dlq, evs, len(ms))
}

// DrainTaps records every registered tap into the store, every poll
// (DefaultTapPoll when 0), until ctx ends. Work runs it; any number of
// processes may run it at once (they compete for the taps' messages, and
// each message is recorded once). Errors are logged and retried at the
// next poll.
func (s *Service) DrainTaps(ctx context.Context, poll time.Duration) {
	if !s.tapping() {
		return
	}
	if poll <= 0 {
		poll = DefaultTapPoll
	}
	for {
		if qs, err := s.d.Returns.Tapped(ctx); err == nil {
			for _, q := range qs {
				if ctx.Err() != nil {
					return
				}
				// A tap the broker deleted (x-expires) is unregistered; the
				// next replay of its DLQ declares and registers it again.
				_, err := s.recordTap(ctx, q)
				switch {
				case errors.Is(err, ErrQueueNotFound):
					// Gone since this process last saw it: the window is
					// open until a run or a check declares it again.
					s.addGap(ctx, "", q, TapGap{From: s.lastSawTap(q, s.d.Clock.Now())})
					if err := s.d.Returns.RemoveTap(ctx, q); err != nil && ctx.Err() == nil {
						s.warn("", q, "unregister deleted tap", err) // tried again at the next poll
					}
				case err != nil && ctx.Err() == nil:
					s.warn("", q, "record tap", err)
				}
			}
		} else if ctx.Err() == nil {
			s.warn("", "", "list taps", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.d.Clock.After(poll):
		}
	}
}

// prepareTap puts the DLQ's tap in place before anything of the replay is
// published, so no return can be missed: it declares and binds the tap
// (re-binding when the DLQ's bindings changed), registers it for the
// workers, records what it already holds, and begins the replay's record
// there. It returns the mode that applies; when the tap cannot be set up
// the run falls back to re-reading the DLQ and says why.
func (rn *run) prepareTap(ctx context.Context) (ReturnsMode, string) {
	s := rn.s
	if !s.tapping() {
		return ReturnsReread, "this bot has no tap support configured"
	}
	st, err := s.d.Taps.EnsureTap(ctx, rn.r.DLQ)
	if err != nil {
		return ReturnsReread, "the tap could not be set up: " + err.Error()
	}
	if st.Mode != ReturnsTap {
		return ReturnsReread, st.Reason
	}
	s.closeOpenGap(ctx, rn.r.ID, rn.r.DLQ) // a window without the tap ends here
	if err := s.d.Returns.AddTap(ctx, rn.r.DLQ); err != nil {
		return ReturnsReread, "the tap could not be registered: " + err.Error()
	}
	// What the tap held before this replay began is not this replay's
	// news: record it first, then take the baseline.
	if _, err := s.recordTap(ctx, rn.r.DLQ); err != nil {
		return ReturnsReread, "the tap could not be read: " + err.Error()
	}
	if err := s.d.Returns.Begin(ctx, rn.r.ID, rn.r.DLQ); err != nil {
		_ = rn.unverified(err) // a record changed in Redis stays so: see settle_unverified.go
		return ReturnsReread, "the tap record could not begin: " + err.Error()
	}
	return ReturnsTap, ""
}
