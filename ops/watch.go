package ops

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// DefaultWatchTick is WatchConfig.Tick's default.
const DefaultWatchTick = 15 * time.Second

// SnoozeFor is how long a Snooze click silences a DLQ's alerts.
const SnoozeFor = time.Hour

// alertEditGap is the least time between two edits of one alert, as the
// bot's other edits.
const alertEditGap = time.Second

// watchPrincipal is who the watch's own audit entries name.
const watchPrincipal = "dlqbot:watch"

// Alert states.
const (
	AlertOpen     = "open"
	AlertResolved = "resolved"
	AlertSnoozed  = "snoozed"
)

// DepthLister samples every queue's depth in one call (the management
// API's queue list; the amqp adapter's QueueDepths). It reads no message.
type DepthLister interface {
	QueueDepths(ctx context.Context) (map[string]int, error)
}

// AlertRecord and AlertStore are the engine's (the store keeps alerts
// without knowing this layer).
type (
	AlertRecord = engine.AlertRecord
	AlertStore  = engine.AlertStore
)

// Alert is what an alert message shows. It carries no message content:
// counts, times, replay ids and failure groups by id and type only.
type Alert struct {
	AlertRecord
	State string
	// Depth is the DLQ's depth now; Within the watch window and PerMinute
	// how fast the arrivals came; Depths the recent depths (a sparkline).
	Depth     int
	Within    time.Duration
	PerMinute float64
	Depths    []int
	// Threshold is the rule's threshold.
	Threshold int
	// Seen is, of an open alert, the failure groups the DLQ's latest
	// whole preview saw (GroupsSeen: ids, types and counts, at Seen.Now);
	// nil when none is known.
	Seen *engine.Arrivals
	// Ended is when it was resolved or snoozed; Replays the replays of
	// the DLQ that ran while it was open (resolved); By who snoozed it,
	// until Until.
	Ended   time.Time
	Replays []string
	By      string
	Until   time.Time
}

// AlertPoster shows alerts; the Slack bot implements it.
type AlertPoster interface {
	PostAlert(ctx context.Context, a Alert) (ts string, err error)
	EditAlert(ctx context.Context, ts string, a Alert) error
}

// WatchObserver counts the watch's work (the metrics package's Metrics).
type WatchObserver interface {
	// WatchAlert counts an alert event: AlertOpen, AlertResolved,
	// AlertSnoozed, or "edited".
	WatchAlert(event string)
	// WatchSkipped counts a tick skipped because the depths could not be
	// read.
	WatchSkipped()
}

// WatchConfig configures a Watcher; zero values mean the defaults.
type WatchConfig struct {
	// Rules are the permissions file's watch: section; without any the
	// watcher watches nothing.
	Rules []commands.WatchRule
	// Tick is how often depths are sampled; default DefaultWatchTick.
	Tick time.Duration
}

// WatchDeps are a Watcher's collaborators; Depths, Alerts and Poster are
// required.
type WatchDeps struct {
	Depths   DepthLister
	Alerts   AlertStore
	Poster   AlertPoster
	Observer WatchObserver // optional
	Clock    engine.Clock  // nil: the system clock
}

// Watcher watches the DLQs of the watch rules and posts, edits and
// resolves their alerts (watch.go); every replica of serve runs one
// against the same AlertStore, and each alert is posted once.
type Watcher struct {
	o   *Ops
	cfg WatchConfig
	d   WatchDeps
	log zerolog.Logger

	mu    sync.Mutex
	track map[string]*depthTrack
}

// NewWatcher returns o's watcher for cfg.
func (o *Ops) NewWatcher(cfg WatchConfig, d WatchDeps) (*Watcher, error) {
	if d.Depths == nil || d.Alerts == nil || d.Poster == nil {
		return nil, errors.New("ops: new watcher: depths, alerts and a poster are required")
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultWatchTick
	}
	if d.Clock == nil {
		d.Clock = engine.SystemClock{}
	}
	return &Watcher{o: o, cfg: cfg, d: d, log: o.log.With().Str("component", "watch").Logger(), track: map[string]*depthTrack{}}, nil
}

// Run samples every Tick until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	if len(w.cfg.Rules) == 0 {
		return
	}
	first := true
	for {
		if n, ok := w.Tick(ctx); ok && first {
			first = false
			w.log.Info().Int("dlqs", n).Int("rules", len(w.cfg.Rules)).Dur("tick", w.cfg.Tick).Msg("watch: first sample taken")
		}
		select {
		case <-ctx.Done():
			return
		case <-w.d.Clock.After(w.cfg.Tick):
		}
	}
}

func (w *Watcher) rule(queue string) (commands.WatchRule, bool) {
	for _, r := range w.cfg.Rules {
		if r.Matches(queue) {
			if r.Threshold <= 0 {
				r.Threshold = commands.DefaultWatchThreshold
			}
			if r.Within <= 0 {
				r.Within = commands.DefaultWatchWithin
			}
			return r, true
		}
	}
	return commands.WatchRule{}, false
}

// Tick samples the depths once and acts on each watched DLQ; it returns
// how many DLQs it watched. The management API is a hint: when it does
// not answer, the tick is skipped (logged and counted), nothing changes
// and ok is false.
func (w *Watcher) Tick(ctx context.Context) (watched int, ok bool) {
	depths, err := w.d.Depths.QueueDepths(ctx)
	if err != nil {
		w.log.Warn().Err(err).Msg("watch: depths could not be read; tick skipped")
		if w.d.Observer != nil {
			w.d.Observer.WatchSkipped()
		}
		return 0, false
	}
	now := w.d.Clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for name := range w.track {
		if _, ok := depths[name]; !ok {
			delete(w.track, name)
		}
	}
	for name, depth := range depths {
		r, ok := w.rule(name)
		if !ok {
			continue
		}
		tr := w.track[name]
		if tr == nil {
			tr = &depthTrack{}
			w.track[name] = tr
		}
		watched++
		tr.add(now, depth, r.Within)
		if err := w.check(ctx, name, r, tr, depth, now); err != nil {
			w.log.Warn().Err(err).Str("dlq", name).Msg("watch")
		}
	}
	return watched, true
}

// check opens, grows or resolves name's alert.
func (w *Watcher) check(ctx context.Context, name string, r commands.WatchRule, tr *depthTrack, depth int, now time.Time) error {
	rec, ok, err := w.d.Alerts.Get(ctx, name)
	if err != nil {
		return err
	}
	n, since := tr.growth(now, r.Within)
	view := func(rec AlertRecord, state string) Alert {
		a := Alert{AlertRecord: rec, State: state, Depth: depth, Within: r.Within, PerMinute: perMinute(n, since),
			Depths: tr.spark(), Threshold: r.Threshold}
		if state == AlertOpen {
			a.Seen = w.alertSeen(ctx, name)
		}
		return a
	}
	switch {
	case ok && depth <= rec.Baseline:
		return w.resolve(ctx, rec, view(rec, AlertResolved), now)
	case ok:
		if rec.TS == "" || depth-rec.Baseline <= rec.Arrived {
			return nil
		}
		rec, grown, err := w.d.Alerts.Grow(ctx, name, rec.ID, depth-rec.Baseline, now, alertEditGap)
		if err != nil || !grown {
			return err
		}
		w.count("edited")
		return w.d.Poster.EditAlert(ctx, rec.TS, view(rec, AlertOpen))
	case n < r.Threshold:
		return nil
	}
	rec = AlertRecord{ID: engine.NewID("a_"), DLQ: name, Channel: r.Channel, Opened: now.UTC(), Baseline: depth - n, Arrived: n, Edited: now.UTC()}
	opened, err := w.d.Alerts.Open(ctx, rec)
	if err != nil || !opened {
		return err
	}
	ts, err := w.d.Poster.PostAlert(ctx, view(rec, AlertOpen))
	if err != nil {
		// Let a later tick (of any replica) try again.
		if _, _, cerr := w.d.Alerts.Close(ctx, name, rec.ID); cerr != nil {
			w.log.Warn().Err(cerr).Str("dlq", name).Msg("watch: an alert that could not be posted could not be withdrawn")
		}
		return fmt.Errorf("post the alert of %s: %w", name, err)
	}
	posted, err := w.d.Alerts.Posted(ctx, name, rec.ID, ts)
	if err != nil {
		return err
	}
	w.count(AlertOpen)
	if !posted {
		// Closed between the post and now: show it resolved at once.
		defer func() {
			_ = w.d.Poster.EditAlert(ctx, ts, Alert{AlertRecord: rec, State: AlertResolved, Ended: now.UTC(), Depth: depth})
		}()
	}
	w.audit(ctx, audit.Entry{Op: audit.OpAlert, DLQ: name, Messages: n,
		Detail: fmt.Sprintf("%d new dead letters within %s; alert posted in %s", n, r.Within, r.Channel)})
	return nil
}

// resolve closes rec (once, whichever replica wins) and edits its message
// to say it is resolved and which replays ran while it was open.
func (w *Watcher) resolve(ctx context.Context, rec AlertRecord, a Alert, now time.Time) error {
	rec, closed, err := w.d.Alerts.Close(ctx, rec.DLQ, rec.ID)
	if err != nil || !closed {
		return err
	}
	a.AlertRecord, a.Ended, a.Replays = rec, now.UTC(), w.drainers(ctx, rec.DLQ, rec.Opened, now)
	w.count(AlertResolved)
	w.audit(ctx, audit.Entry{Op: audit.OpAlertResolved, DLQ: rec.DLQ, Messages: rec.Arrived,
		Detail: fmt.Sprintf("back to %d; replays while open: %v", a.Depth, a.Replays)})
	if rec.TS == "" {
		return nil
	}
	return w.d.Poster.EditAlert(ctx, rec.TS, a)
}

// drainers are the ids of dlq's replays that ran while its alert was
// open (created before now, not ended before opened), oldest first.
func (w *Watcher) drainers(ctx context.Context, dlq string, opened, now time.Time) []string {
	rs, err := w.o.d.Replays.List(ctx, 200)
	if err != nil {
		w.log.Warn().Err(err).Str("dlq", dlq).Msg("watch: the replays that drained an alert's DLQ could not be listed")
		return nil
	}
	var out []string
	for i := len(rs) - 1; i >= 0; i-- {
		r := rs[i]
		if r.DLQ == dlq && !r.CreatedAt.After(now) && (r.EndedAt.IsZero() || !r.EndedAt.Before(opened)) {
			out = append(out, r.ID)
		}
	}
	return out
}

func (w *Watcher) count(event string) {
	if w.d.Observer != nil {
		w.d.Observer.WatchAlert(event)
	}
}

// audit records one of the watch's own entries.
func (w *Watcher) audit(ctx context.Context, e audit.Entry) {
	e.Time = w.d.Clock.Now().UTC()
	e.Principal, e.Identity, e.FrontEnd, e.Outcome = watchPrincipal, watchPrincipal, FrontWatch, audit.OutcomeOK
	if err := w.o.d.Audit.Record(context.WithoutCancel(ctx), e); err != nil {
		w.log.Error().Err(err).Str("op", e.Op).Str("dlq", e.DLQ).Msg("audit entry could not be recorded")
	}
}
