package review

import (
	"context"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
)

// recordTap drains dlq's tap into the store: every message is an arrival
// in the DLQ, and one that carries a replay id and a new death is a return
// of that replay. It returns how many messages it recorded.
func (s *Base) RecordTap(ctx context.Context, dlq string) (int, error) {
	n, err := s.d.Taps.DrainTap(ctx, dlq, func(ms []letter.Message) error { return s.RecordBatch(ctx, dlq, ms) })
	if err != nil {
		return n, fmt.Errorf("engine: record tap of %s: %w", dlq, err)
	}
	s.SawTap(dlq)
	return n, nil
}

// recordBatch records one batch of dlq's tap: every message is an
// arrival, and one with a replay id and a new death a return.
func (s *Base) RecordBatch(ctx context.Context, dlq string, ms []letter.Message) error {
	var evs []engine.ReturnEvent
	now := s.d.Clock.Now()
	for _, m := range ms {
		meta := s.ViewMeta(dlq, m)
		if meta.ReplayID == "" || !meta.Returned {
			continue
		}
		at := engine.LatestDeath(meta)
		if at.IsZero() {
			at = now
		}
		evs = append(evs, engine.ReturnEvent{
			ReplayID: meta.ReplayID, ID: meta.ID, Source: meta.Source, Group: meta.FailureGroup,
			Type:   letter.FailureType(meta.ExceptionType, meta.Exception, meta.Reason),
			Reason: string(meta.Reason), Exception: meta.Exception, ReplayCount: meta.ReplayCount,
			At: at, Redelivered: m.Redelivered,
		})
	}
	return s.d.Returns.Record(ctx, dlq, evs, len(ms))
}

// redeclareTap declares dlq's missing tap again with the DLQ's bindings
// and registers it for the workers; it returns when the tap was back.
func (s *Base) RedeclareTap(ctx context.Context, dlq string) (time.Time, error) {
	st, err := s.d.Taps.EnsureTap(ctx, dlq)
	if err != nil {
		return time.Time{}, err
	}
	if st.Mode != engine.ReturnsTap {
		return time.Time{}, fmt.Errorf("engine: tap of %s cannot be declared again: %s", dlq, st.Reason)
	}
	to := s.d.Clock.Now()
	s.SawTap(dlq)
	if err := s.d.Returns.AddTap(ctx, dlq); err != nil {
		s.Warn("", dlq, "register tap declared again", err) // the run drains it all the same
	}
	return to, nil
}

// addGap records a window without dlq's tap in the store (a failure is
// logged: the run that noticed still knows).
func (s *Base) AddGap(ctx context.Context, replay, dlq string, g engine.TapGap) {
	if err := s.d.TapGaps.AddTapGap(ctx, dlq, g); err != nil {
		s.Warn(replay, dlq, "record tap gap", err)
	}
}

// sawTap notes that dlq's tap was in place just now.
func (s *Base) SawTap(dlq string) { s.tapSeen.Store(dlq, s.d.Clock.Now()) }

// lastSawTap is when this process last found dlq's tap in place, or
// otherwise when it is known to have been (the start of the run or the
// replay).
func (s *Base) LastSawTap(dlq string, otherwise time.Time) time.Time {
	if v, ok := s.tapSeen.Load(dlq); ok {
		if t := v.(time.Time); t.After(otherwise) {
			return t
		}
	}
	return otherwise
}
