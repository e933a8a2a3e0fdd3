package replay

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
)

// tapRepairRetry is how often a watch tries again to declare a missing
// tap, or to consume a tap whose channel closed.
const tapRepairRetry = time.Second

// tapWatch is one run's watch over its DLQ's tap, a background part that
// lives as long as the run. It holds a consumer on the tap
// (Taps.WatchTap), recording what arrives as a drain would, so the tap's
// loss is noticed the moment the broker deletes it (the broker cancels
// the consumer) — or when a drain or the watch's passive declare finds
// it missing. It then declares the tap again with the DLQ's bindings
// (Taps.EnsureTap), registers it for the workers, and records the window
// without it, in the store (TapGaps: any process's check knows) and for
// the run, which reconciles the window with a counted re-read of the DLQ
// before the step settles (settle_returns.go).
type tapWatch struct {
	s      *Service
	dlq    string
	replay string
	start  time.Time // when the run began: the tap was in place then
	nudge  chan struct{}

	mu   sync.Mutex
	gaps []engine.TapGap // this run's windows without the tap; the last may be open
}

// watchTap starts the run's watch when the run finds returns through a
// tap; stop ends it and waits for it (its unrecorded deliveries go back
// to the tap).
func (rf *returnsFinder) watchTap(ctx context.Context) (stop func()) {
	if rf.mode != engine.ReturnsTap {
		return func() {}
	}
	w := &tapWatch{s: rf.rn.s, dlq: rf.dlq, replay: rf.id, start: rf.s.d.Clock.Now(), nudge: make(chan struct{}, 1)}
	rf.watch = w
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(wctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

func (w *tapWatch) run(ctx context.Context) {
	s := w.s
	for ctx.Err() == nil {
		err := s.d.Taps.WatchTap(ctx, w.dlq, func(ms []letter.Message) error {
			if err := s.base.RecordBatch(ctx, w.dlq, ms); err != nil {
				return err
			}
			s.base.SawTap(w.dlq)
			return nil
		})
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, engine.ErrQueueNotFound):
			w.noticed(s.d.Clock.Now())
			w.repair(ctx)
			continue
		case err != nil:
			s.base.Warn(w.replay, w.dlq, "watch tap", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-w.nudge:
		case <-s.d.Clock.After(tapRepairRetry):
		}
	}
}

// noticed is told that the tap was found missing by a look that began at
// since (the watch's own, or a drain's): it opens a window from when the
// tap was last seen — unless one is open, or one closed since the look
// began (the look saw that loss) — and wakes the watch to declare it
// again.
func (w *tapWatch) noticed(since time.Time) {
	if w == nil {
		return
	}
	w.mu.Lock()
	n := len(w.gaps)
	if n == 0 || (!w.gaps[n-1].Open() && w.gaps[n-1].To.Before(since)) {
		w.gaps = append(w.gaps, engine.TapGap{From: w.s.base.LastSawTap(w.dlq, w.start)})
	}
	w.mu.Unlock()
	select {
	case w.nudge <- struct{}{}:
	default:
	}
}

// repair declares the missing tap again, trying every tapRepairRetry
// until it succeeds or ctx ends, and closes the open window.
func (w *tapWatch) repair(ctx context.Context) {
	w.mu.Lock()
	from := w.gaps[len(w.gaps)-1].From
	w.mu.Unlock()
	s := w.s
	s.base.AddGap(ctx, w.replay, w.dlq, engine.TapGap{From: from}) // open: other processes' checks know at once
	for {
		to, err := s.base.RedeclareTap(ctx, w.dlq)
		if err == nil {
			s.base.AddGap(ctx, w.replay, w.dlq, engine.TapGap{From: from, To: to})
			w.mu.Lock()
			w.gaps[len(w.gaps)-1].To = to
			w.mu.Unlock()
			s.cfg.Log.Warn().Str("replay_id", w.replay).Str("dlq", w.dlq).Str("op", "watch tap").
				Time("gone_from", from).Time("gone_to", to).
				Msg("the DLQ's tap was gone: declared it again; copies that came back meanwhile are counted by re-reading the DLQ")
			return
		}
		s.base.Warn(w.replay, w.dlq, "declare missing tap again", err)
		select {
		case <-ctx.Done():
			return
		case <-s.d.Clock.After(tapRepairRetry):
		}
	}
}

// touching returns the run's windows without the tap that overlap the
// time since since.
func (w *tapWatch) touching(since time.Time) []engine.TapGap {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []engine.TapGap
	for _, g := range w.gaps {
		if g.Touches(since, time.Time{}) {
			out = append(out, g)
		}
	}
	return out
}

// all returns every window of the run without the tap.
func (w *tapWatch) all() []engine.TapGap {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]engine.TapGap(nil), w.gaps...)
}

// closeOpenGap closes dlq's open window without its tap, if the store
// has one, now that the tap is in place again.
func (s *Service) closeOpenGap(ctx context.Context, replay, dlq string) {
	gaps, err := s.d.TapGaps.TapGaps(ctx, dlq)
	if err != nil {
		s.base.Warn(replay, dlq, "read tap gaps", err)
		return
	}
	for _, g := range gaps {
		if g.Open() {
			s.base.AddGap(ctx, replay, dlq, engine.TapGap{From: g.From, To: s.d.Clock.Now()})
			return
		}
	}
}
