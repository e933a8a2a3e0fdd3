package ops

import (
	"context"
	"time"

	"github.com/stroma/dlqbot/audit"
)

// Snooze silences dlq's alerts for SnoozeFor on c's behalf (the alert's
// Snooze button): c needs `read` on the DLQ. Its open alert, if any, is
// closed and edited to say who snoozed it until when; no new alert opens
// for the DLQ until then. It returns when the snooze ends.
func (w *Watcher) Snooze(ctx context.Context, c Caller, dlq string) (until time.Time, err error) {
	o := w.o
	e := audit.Entry{Op: audit.OpSnooze, DLQ: dlq}
	defer func() { o.record(ctx, c, e, err) }()
	if err := o.admit(ctx, c); err != nil {
		return time.Time{}, err
	}
	if err := o.permit(ctx, c, func(id string, g []string) error {
		return o.policy.CheckRead(id, g, dlq, "to snooze its alerts")
	}); err != nil {
		return time.Time{}, err
	}
	now := w.d.Clock.Now()
	until = now.Add(SnoozeFor).UTC()
	if err := o.begin(ctx, c, e); err != nil {
		return time.Time{}, err
	}
	if err := w.d.Alerts.Snooze(ctx, dlq, SnoozeFor); err != nil {
		return time.Time{}, err
	}
	e.Detail = "alerts snoozed until " + until.Format(time.RFC3339)
	rec, ok, err := w.d.Alerts.Get(ctx, dlq)
	if err != nil || !ok {
		return until, err
	}
	rec, closed, err := w.d.Alerts.Close(ctx, dlq, rec.ID)
	if err != nil || !closed {
		return until, err
	}
	w.count(AlertSnoozed)
	if rec.TS != "" {
		a := Alert{AlertRecord: rec, State: AlertSnoozed, Ended: now.UTC(), By: o.acting(c), Until: until}
		w.mu.Lock()
		if tr := w.track[dlq]; tr != nil {
			a.Depths = tr.spark()
		}
		w.mu.Unlock()
		if err := w.d.Poster.EditAlert(ctx, rec.TS, a); err != nil {
			w.log.Warn().Err(err).Str("dlq", dlq).Msg("watch: the snoozed alert could not be edited")
		}
	}
	return until, nil
}

// Alerts lists the open alerts (the dashboard's), to anyone: they name
// DLQs and counts only.
func (w *Watcher) Alerts(ctx context.Context) ([]AlertRecord, error) {
	return w.d.Alerts.List(ctx)
}
