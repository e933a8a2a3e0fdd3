package metrics

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stroma/dlqbot/engine"
)

// Namespace starts every metric name.
const Namespace = "dlqbot"

// trackedStates are the states the replays gauge reports; a replay in a
// final state (finished, cancelled, interrupted) leaves the gauge.
var trackedStates = []engine.State{engine.StateQueued, engine.StateRunning, engine.StatePaused, engine.StateStopped}

// Metrics holds dlqbot's Prometheus collectors and the little state needed
// to derive them from replay events. It is safe for concurrent use.
type Metrics struct {
	reg      prometheus.Registerer
	gatherer prometheus.Gatherer

	events     *prometheus.CounterVec
	replays    *prometheus.GaugeVec
	sent       prometheus.Counter
	settled    prometheus.Counter
	returned   prometheus.Counter
	failed     prometheus.Counter
	duplicated prometheus.Counter
	stepDur    prometheus.Histogram

	slackCalls   *prometheus.CounterVec
	slackRetries *prometheus.CounterVec

	refused *prometheus.CounterVec

	scanMessages prometheus.Counter
	scanDur      prometheus.Histogram
	scanRate     prometheus.Gauge

	watch watchCounters

	mu   sync.Mutex
	runs map[string]*seen
}

// seen is what this process last saw of one replay.
type seen struct {
	state                                          engine.State
	sent, settled, returned, failed, missing, dups int
}

// New registers dlqbot's collectors on reg and returns them. A nil reg gets a
// new private registry. When reg is also a prometheus.Gatherer (a
// *prometheus.Registry is), Handler serves it; otherwise Handler serves
// prometheus.DefaultGatherer. New panics if the collectors are already
// registered on reg, like prometheus.MustRegister.
func New(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{reg: reg, runs: map[string]*seen{}}
	if g, ok := reg.(prometheus.Gatherer); ok {
		m.gatherer = g
	} else {
		m.gatherer = prometheus.DefaultGatherer
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
	}
	m.events = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "replay_events_total",
		Help: "Replay progress events by kind (started, step_started, step_passed, stopped, paused, resumed, cancelled, finished, interrupted, follow_up, parked)."}, []string{"event"})
	m.replays = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "replays",
		Help: "Replays this process last saw in each non-final state."}, []string{"state"})
	m.sent = counter("messages_sent_total", "Copies replayed and confirmed by the broker.")
	m.settled = counter("messages_settled_total", "Replayed copies observed to have left their target queue.")
	m.returned = counter("messages_returned_total", "Replayed copies that came back to the DLQ with a new death.")
	m.failed = counter("messages_failed_total", "Copies the broker did not take (unroutable, nacked) and previewed messages missing from the DLQ.")
	m.duplicated = counter("messages_duplicated_total", "Copies sent whose originals could not be acked (they stay in the DLQ and in the ledger).")
	m.stepDur = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "step_duration_seconds",
		Help: "Canary step durations, from the first send to the settle verdict.", Buckets: prometheus.ExponentialBuckets(0.25, 2, 12)})
	m.slackCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "slack_calls_total",
		Help: "Slack Web API calls by method and result (ok or error)."}, []string{"method", "result"})
	m.slackRetries = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "slack_retries_total",
		Help: "Slack Web API calls retried, by method."}, []string{"method"})
	m.scanMessages = counter("scan_messages_total", "Messages read by scans of dead-letter queues.")
	m.scanDur = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "scan_duration_seconds",
		Help: "Durations of scans of dead-letter queues.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)})
	m.scanRate = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "scan_rate_messages_per_second",
		Help: "Messages per second of the last scan of a dead-letter queue."})

	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "records_refused_total",
		Help: "Records in Redis refused by their check (signature, version, side fields), by kind (preview, replay, slack refs)."}, []string{"record"})

	m.watch = newWatchCounters(reg)
	reg.MustRegister(m.events, m.replays, m.sent, m.settled, m.returned, m.failed, m.duplicated, m.stepDur,
		m.slackCalls, m.slackRetries, m.scanMessages, m.scanDur, m.scanRate, m.refused)
	for _, s := range trackedStates {
		m.replays.WithLabelValues(string(s)).Set(0)
	}
	return m
}

// Handler serves the metrics in the Prometheus exposition format (mount it
// on /metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Notify counts one replay event; it implements engine.Notifier and never
// blocks on anything but a short mutex.
func (m *Metrics) Notify(_ context.Context, e engine.Event) {
	m.events.WithLabelValues(string(e.Kind)).Inc()
	if e.Step != nil && e.Step.Duration > 0 && (e.Kind == engine.EventStepPassed || e.Kind == engine.EventStopped) {
		m.stepDur.Observe(e.Step.Duration.Seconds())
	}
	if e.Replay.ID == "" || e.Kind == engine.EventFollowUp || e.Kind == engine.EventParked {
		// Follow-ups and parking report on a replay after it ended: they
		// change neither its state nor what it sent.
		return
	}
	r := e.Replay
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, known := m.runs[r.ID]
	if known && e.Kind != engine.EventStarted && e.Kind != engine.EventResumed {
		m.sent.Add(gain(prev.sent, r.Sent))
		m.settled.Add(gain(prev.settled, r.Settled))
		m.returned.Add(gain(prev.returned, r.Returned))
		m.failed.Add(gain(prev.failed, r.Failed) + gain(prev.missing, r.Missing))
		m.duplicated.Add(gain(prev.dups, r.Duplicates))
	}
	if known && tracked(prev.state) {
		m.replays.WithLabelValues(string(prev.state)).Dec()
	}
	if r.State.Terminal() {
		delete(m.runs, r.ID)
		return
	}
	m.runs[r.ID] = &seen{state: r.State, sent: r.Sent, settled: r.Settled, returned: r.Returned,
		failed: r.Failed, missing: r.Missing, dups: r.Duplicates}
	if tracked(r.State) {
		m.replays.WithLabelValues(string(r.State)).Inc()
	}
}

// gain is how much a count grew, never negative.
func gain(before, now int) float64 {
	if now > before {
		return float64(now - before)
	}
	return 0
}

func tracked(s engine.State) bool {
	for _, t := range trackedStates {
		if s == t {
			return true
		}
	}
	return false
}

// SlackCall counts one Slack Web API call of method (such as
// "chat.postMessage"), failed when err is not nil.
func (m *Metrics) SlackCall(method string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.slackCalls.WithLabelValues(method, result).Inc()
}

// RecordRefused counts one record of kind ("preview", "replay", "slack
// refs") that failed its check and was skipped or refused.
func (m *Metrics) RecordRefused(kind string) {
	m.refused.WithLabelValues(kind).Inc()
}

// SlackRetry counts one retry of a Slack Web API call of method.
func (m *Metrics) SlackRetry(method string) {
	m.slackRetries.WithLabelValues(method).Inc()
}

// ScanObserved records one scan of a dead-letter queue that read messages
// in d.
func (m *Metrics) ScanObserved(messages int, d time.Duration) {
	if messages < 0 {
		messages = 0
	}
	m.scanMessages.Add(float64(messages))
	m.scanDur.Observe(d.Seconds())
	if d > 0 {
		m.scanRate.Set(float64(messages) / d.Seconds())
	}
}

var (
	_ engine.Notifier     = (*Metrics)(nil)
	_ engine.ScanObserver = (*Metrics)(nil)
)
