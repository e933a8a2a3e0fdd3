package ops

import (
	"context"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// alertGroups is how many failure groups an alert names.
const alertGroups = 3

// GroupsSeen keeps, per DLQ, the failure groups the latest preview of the
// whole DLQ saw, each by its id, exception type (or dead-letter reason)
// and count — never its text; the store's Alerts implements it. A watch
// alert shows them: the watch itself never reads a message, and the
// groups it can name are those a preview already read (with when).
type GroupsSeen interface {
	SaveGroups(ctx context.Context, dlq string, a engine.Arrivals) error
	// Groups returns what was saved for dlq; ok is false when nothing is.
	Groups(ctx context.Context, dlq string) (a engine.Arrivals, ok bool, err error)
}

// seenGroups is what GroupsSeen keeps of a preview's arrivals: the time
// of the preview, the count of its messages and its largest failure
// groups without their texts or histograms.
func seenGroups(a *engine.Arrivals, now time.Time) engine.Arrivals {
	if a == nil {
		return engine.Arrivals{Now: now.UTC()}
	}
	out := engine.Arrivals{Now: a.Now, ArrivalRow: engine.ArrivalRow{Messages: a.Messages, Last: a.Last}, MoreGroups: a.MoreGroups}
	for i, g := range a.Groups {
		if i == alertGroups {
			out.MoreGroups += g.Messages
			continue
		}
		out.Groups = append(out.Groups, engine.ArrivalRow{GroupID: g.GroupID, Type: g.Type, Messages: g.Messages, Last: g.Last})
	}
	return out
}

// wholeDLQ reports whether sel selects every message of its DLQ that a
// replay could take: no filter narrows it (park_after and to= do not
// change which failures it sees).
func wholeDLQ(sel engine.Selection) bool {
	return len(sel.IDs) == 0 && sel.Reason == "" && sel.Source == "" && sel.Since.IsZero() && sel.Until.IsZero() &&
		sel.Exception == "" && sel.Group == "" && sel.ReplayedBy == "" && len(sel.Headers) == 0 && sel.Limit == 0
}

// saveGroups keeps the failure groups of p, a preview of the whole DLQ,
// for the DLQ's watch alerts; a failure is logged, the preview stands.
func (o *Ops) saveGroups(ctx context.Context, sel engine.Selection, p *engine.Preview) {
	if o.d.GroupsSeen == nil || p == nil || !wholeDLQ(sel) {
		return
	}
	if err := o.d.GroupsSeen.SaveGroups(context.WithoutCancel(ctx), sel.DLQ, seenGroups(p.Arrivals, o.d.Now())); err != nil {
		o.log.Warn().Err(err).Str("dlq", sel.DLQ).Msg("the preview's failure groups were not kept for the DLQ's alerts")
	}
}

// alertSeen is what an open alert of dlq shows of its failure groups: the
// latest whole preview's, or nil when none is known (the alert then asks
// for a preview).
func (w *Watcher) alertSeen(ctx context.Context, dlq string) *engine.Arrivals {
	if w.o.d.GroupsSeen == nil {
		return nil
	}
	a, ok, err := w.o.d.GroupsSeen.Groups(ctx, dlq)
	if err != nil {
		w.log.Warn().Err(err).Str("dlq", dlq).Msg("watch: the failure groups last seen in the DLQ could not be read")
		return nil
	}
	if !ok || len(a.Groups) == 0 {
		return nil
	}
	return &a
}
