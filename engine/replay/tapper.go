package replay

import (
	"context"
	"errors"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// drainTaps records every registered tap into the store, every poll
// (DefaultTapPoll when 0), until ctx ends. Work runs it; any number of
// processes may run it at once (they compete for the taps' messages, and
// each message is recorded once). Errors are logged and retried at the
// next poll.
func (s *Service) drainTaps(ctx context.Context, poll time.Duration) {
	if poll <= 0 {
		poll = engine.DefaultTapPoll
	}
	for {
		if qs, err := s.d.Returns.Tapped(ctx); err == nil {
			for _, q := range qs {
				if ctx.Err() != nil {
					return
				}
				// A tap the broker deleted (x-expires) is unregistered; the
				// next replay of its DLQ declares and registers it again.
				_, err := s.base.RecordTap(ctx, q)
				switch {
				case errors.Is(err, engine.ErrQueueNotFound):
					// Gone since this process last saw it: the window is
					// open until a run or a check declares it again.
					s.base.AddGap(ctx, "", q, engine.TapGap{From: s.base.LastSawTap(q, s.d.Clock.Now())})
					if err := s.d.Returns.RemoveTap(ctx, q); err != nil && ctx.Err() == nil {
						s.base.Warn("", q, "unregister deleted tap", err) // tried again at the next poll
					}
				case err != nil && ctx.Err() == nil:
					s.base.Warn("", q, "record tap", err)
				}
			}
		} else if ctx.Err() == nil {
			s.base.Warn("", "", "list taps", err)
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
func (rf *returnsFinder) prepareTap(ctx context.Context) (engine.ReturnsMode, string) {
	s := rf.rn.s
	st, err := s.d.Taps.EnsureTap(ctx, rf.dlq)
	if err != nil {
		return engine.ReturnsReread, "the tap could not be set up: " + err.Error()
	}
	if st.Mode != engine.ReturnsTap {
		return engine.ReturnsReread, st.Reason
	}
	s.closeOpenGap(ctx, rf.id, rf.dlq) // a window without the tap ends here
	if err := s.d.Returns.AddTap(ctx, rf.dlq); err != nil {
		return engine.ReturnsReread, "the tap could not be registered: " + err.Error()
	}
	// What the tap held before this replay began is not this replay's
	// news: record it first, then take the baseline.
	if _, err := s.base.RecordTap(ctx, rf.dlq); err != nil {
		return engine.ReturnsReread, "the tap could not be read: " + err.Error()
	}
	if err := s.d.Returns.Begin(ctx, rf.id, rf.dlq); err != nil {
		_ = rf.rn.jd.unverified(err) // a record changed in Redis stays so: see settle_unverified.go
		return engine.ReturnsReread, "the tap record could not begin: " + err.Error()
	}
	return engine.ReturnsTap, ""
}
