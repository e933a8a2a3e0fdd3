package metrics

import "github.com/prometheus/client_golang/prometheus"

// watchCounters are the DLQ watch's counters (ops.WatchObserver).
type watchCounters struct {
	alerts  *prometheus.CounterVec
	skipped prometheus.Counter
}

func newWatchCounters(reg prometheus.Registerer) watchCounters {
	w := watchCounters{
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "watch_alerts_total",
			Help: "DLQ watch alert events by kind: open (posted), edited, resolved, snoozed; counted by the replica that made it."}, []string{"event"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "watch_ticks_skipped_total",
			Help: "DLQ watch ticks skipped because the management API did not answer with the queue list."}),
	}
	reg.MustRegister(w.alerts, w.skipped)
	return w
}

// WatchAlert counts a DLQ watch alert event (ops.WatchObserver).
func (m *Metrics) WatchAlert(event string) { m.watch.alerts.WithLabelValues(event).Inc() }

// WatchSkipped counts a skipped watch tick (ops.WatchObserver).
func (m *Metrics) WatchSkipped() { m.watch.skipped.Inc() }
