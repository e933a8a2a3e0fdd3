package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/metrics"
	"github.com/stroma/dlqbot/ops"
)

func newMetrics(t *testing.T) (*metrics.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	return metrics.New(reg), reg
}

// ev builds an event of kind for replay id in state with the given counts.
func ev(kind engine.EventKind, id string, state engine.State, sent, settled, returned int) engine.Event {
	return engine.Event{Kind: kind, Replay: engine.Replay{ID: id, State: state, Sent: sent, Settled: settled, Returned: returned}}
}

func gauge(t *testing.T, reg *prometheus.Registry, state string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "dlqbot_replays" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if lp.GetName() == "state" && lp.GetValue() == state {
					return mt.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no dlqbot_replays{state=%q}", state)
	return 0
}

func TestReplayLifecycleCounts(t *testing.T) {
	m, reg := newMetrics(t)
	ctx := context.Background()
	step1 := &engine.StepResult{Step: 1, Sent: 10, Settled: 10, Duration: 2 * time.Second}
	step2 := &engine.StepResult{Step: 2, Sent: 20, Settled: 18, Returned: 2, Duration: 5 * time.Second}
	m.Notify(ctx, ev(engine.EventStarted, "r_1", engine.StateRunning, 0, 0, 0))
	m.Notify(ctx, ev(engine.EventStepStarted, "r_1", engine.StateRunning, 0, 0, 0))
	if got := gauge(t, reg, "running"); got != 1 {
		t.Fatalf("running = %v after start, want 1", got)
	}
	e := ev(engine.EventStepPassed, "r_1", engine.StateRunning, 10, 10, 0)
	e.Step = step1
	m.Notify(ctx, e)
	m.Notify(ctx, ev(engine.EventStepStarted, "r_1", engine.StateRunning, 10, 10, 0))
	e = ev(engine.EventStopped, "r_1", engine.StateStopped, 30, 28, 2)
	e.Step = step2
	m.Notify(ctx, e)

	for name, want := range map[string]float64{
		"dlqbot_messages_sent_total": 30, "dlqbot_messages_settled_total": 28, "dlqbot_messages_returned_total": 2,
	} {
		if got := value(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := gauge(t, reg, "running"); got != 0 {
		t.Errorf("running = %v after the stop, want 0", got)
	}
	if got := gauge(t, reg, "stopped"); got != 1 {
		t.Errorf("stopped = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(reg, "dlqbot_step_duration_seconds"); n != 1 {
		t.Errorf("%d step duration series, want 1", n)
	}
	want := `
# HELP dlqbot_replay_events_total Replay progress events by kind (started, step_started, step_passed, stopped, paused, resumed, cancelled, finished, interrupted, follow_up, parked).
# TYPE dlqbot_replay_events_total counter
dlqbot_replay_events_total{event="started"} 1
dlqbot_replay_events_total{event="step_passed"} 1
dlqbot_replay_events_total{event="step_started"} 2
dlqbot_replay_events_total{event="stopped"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "dlqbot_replay_events_total"); err != nil {
		t.Error(err)
	}
	wantHist := `
# HELP dlqbot_step_duration_seconds Canary step durations, from the first send to the settle verdict.
# TYPE dlqbot_step_duration_seconds histogram
dlqbot_step_duration_seconds_bucket{le="0.25"} 0
dlqbot_step_duration_seconds_bucket{le="0.5"} 0
dlqbot_step_duration_seconds_bucket{le="1"} 0
dlqbot_step_duration_seconds_bucket{le="2"} 1
dlqbot_step_duration_seconds_bucket{le="4"} 1
dlqbot_step_duration_seconds_bucket{le="8"} 2
dlqbot_step_duration_seconds_bucket{le="16"} 2
dlqbot_step_duration_seconds_bucket{le="32"} 2
dlqbot_step_duration_seconds_bucket{le="64"} 2
dlqbot_step_duration_seconds_bucket{le="128"} 2
dlqbot_step_duration_seconds_bucket{le="256"} 2
dlqbot_step_duration_seconds_bucket{le="512"} 2
dlqbot_step_duration_seconds_bucket{le="+Inf"} 2
dlqbot_step_duration_seconds_sum 7
dlqbot_step_duration_seconds_count 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantHist), "dlqbot_step_duration_seconds"); err != nil {
		t.Error(err)
	}
}

// value returns the value of the single-series counter or gauge name.
func value(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		mt := mf.GetMetric()[0]
		if c := mt.GetCounter(); c != nil {
			return c.GetValue()
		}
		return mt.GetGauge().GetValue()
	}
	t.Fatalf("no single-series metric %s", name)
	return 0
}

func TestPausedMidStepCountsWhatWasSent(t *testing.T) {
	m, reg := newMetrics(t)
	ctx := context.Background()
	m.Notify(ctx, ev(engine.EventStarted, "r_p", engine.StateRunning, 0, 0, 0))
	m.Notify(ctx, ev(engine.EventStepStarted, "r_p", engine.StateRunning, 0, 0, 0))
	// Paused half-way through a step: no step result, but the record moved.
	m.Notify(ctx, ev(engine.EventPaused, "r_p", engine.StatePaused, 150, 0, 0))
	if got := value(t, reg, "dlqbot_messages_sent_total"); got != 150 {
		t.Fatalf("sent = %v after a pause mid-step, want 150", got)
	}
	if gauge(t, reg, "paused") != 1 || gauge(t, reg, "running") != 0 {
		t.Fatalf("paused %v running %v, want 1 0", gauge(t, reg, "paused"), gauge(t, reg, "running"))
	}
	// Resumed here: the baseline is the record as it stands, nothing is
	// counted twice.
	m.Notify(ctx, ev(engine.EventResumed, "r_p", engine.StateRunning, 150, 0, 0))
	e := ev(engine.EventStepPassed, "r_p", engine.StateRunning, 300, 300, 0)
	e.Step = &engine.StepResult{Step: 1, Sent: 150, Settled: 300, Duration: time.Second}
	m.Notify(ctx, e)
	m.Notify(ctx, ev(engine.EventFinished, "r_p", engine.StateFinished, 300, 300, 0))
	if got := value(t, reg, "dlqbot_messages_sent_total"); got != 300 {
		t.Errorf("sent = %v, want 300", got)
	}
	if got := value(t, reg, "dlqbot_messages_settled_total"); got != 300 {
		t.Errorf("settled = %v, want 300", got)
	}
	for _, s := range []string{"queued", "running", "paused", "stopped"} {
		if g := gauge(t, reg, s); g != 0 {
			t.Errorf("%s = %v after the replay finished, want 0", s, g)
		}
	}
}

func TestReplayResumedFromAnotherProcessIsNotCountedTwice(t *testing.T) {
	m, reg := newMetrics(t)
	ctx := context.Background()
	// Another process sent 400; this one resumes it and sends 100 more.
	m.Notify(ctx, ev(engine.EventResumed, "r_x", engine.StateRunning, 400, 380, 0))
	e := engine.Event{Kind: engine.EventFinished, Replay: engine.Replay{ID: "r_x", State: engine.StateFinished,
		Sent: 500, Settled: 480, Failed: 1, Missing: 2, Duplicates: 3}}
	m.Notify(ctx, e)
	if got := value(t, reg, "dlqbot_messages_sent_total"); got != 100 {
		t.Errorf("sent = %v, want 100", got)
	}
	if got := value(t, reg, "dlqbot_messages_failed_total"); got != 3 {
		t.Errorf("failed = %v, want 3 (1 not delivered + 2 missing)", got)
	}
	if got := value(t, reg, "dlqbot_messages_duplicated_total"); got != 3 {
		t.Errorf("duplicated = %v, want 3", got)
	}
	// An interruption reported by this process's reaper for a replay it
	// never ran counts the event only.
	m.Notify(ctx, ev(engine.EventInterrupted, "r_y", engine.StateInterrupted, 70, 0, 0))
	m.Notify(ctx, engine.Event{Kind: engine.EventFollowUp, Replay: engine.Replay{ID: "r_x", State: engine.StateFinished, Sent: 500, Returned: 9}})
	if got := value(t, reg, "dlqbot_messages_sent_total"); got != 100 {
		t.Errorf("sent = %v after another replay's interruption, want 100", got)
	}
	if got := value(t, reg, "dlqbot_messages_returned_total"); got != 0 {
		t.Errorf("returned = %v after a follow-up, want 0 (follow-ups report, they do not replay)", got)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP dlqbot_replay_events_total Replay progress events by kind (started, step_started, step_passed, stopped, paused, resumed, cancelled, finished, interrupted, follow_up, parked).
# TYPE dlqbot_replay_events_total counter
dlqbot_replay_events_total{event="finished"} 1
dlqbot_replay_events_total{event="follow_up"} 1
dlqbot_replay_events_total{event="interrupted"} 1
dlqbot_replay_events_total{event="resumed"} 1
`), "dlqbot_replay_events_total"); err != nil {
		t.Error(err)
	}
}

func TestSlackAndScan(t *testing.T) {
	m, reg := newMetrics(t)
	m.SlackCall("chat.postMessage", nil)
	m.SlackCall("chat.postMessage", nil)
	m.SlackCall("chat.update", errors.New("ratelimited"))
	m.SlackRetry("chat.update")
	m.ScanObserved(10000, 2*time.Second)
	m.ScanObserved(-1, 0) // nonsense input is clamped, not a panic
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP dlqbot_slack_calls_total Slack Web API calls by method and result (ok or error).
# TYPE dlqbot_slack_calls_total counter
dlqbot_slack_calls_total{method="chat.postMessage",result="ok"} 2
dlqbot_slack_calls_total{method="chat.update",result="error"} 1
# HELP dlqbot_slack_retries_total Slack Web API calls retried, by method.
# TYPE dlqbot_slack_retries_total counter
dlqbot_slack_retries_total{method="chat.update"} 1
# HELP dlqbot_scan_messages_total Messages read by scans of dead-letter queues.
# TYPE dlqbot_scan_messages_total counter
dlqbot_scan_messages_total 10000
# HELP dlqbot_scan_rate_messages_per_second Messages per second of the last scan of a dead-letter queue.
# TYPE dlqbot_scan_rate_messages_per_second gauge
dlqbot_scan_rate_messages_per_second 5000
`), "dlqbot_slack_calls_total", "dlqbot_slack_retries_total", "dlqbot_scan_messages_total", "dlqbot_scan_rate_messages_per_second"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "dlqbot_scan_duration_seconds"); n != 1 {
		t.Errorf("%d scan duration series, want 1", n)
	}
}

func TestHandlerServesTheRegistry(t *testing.T) {
	m, _ := newMetrics(t)
	m.Notify(context.Background(), ev(engine.EventStarted, "r_h", engine.StateRunning, 0, 0, 0))
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	for _, want := range []string{`dlqbot_replays{state="running"} 1`, `dlqbot_replay_events_total{event="started"} 1`, "dlqbot_messages_sent_total 0"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

// TestWatchAlertsOnMetrics: the DLQ watch's events, counted through the
// observer serve gives the watch, are on /metrics by event.
func TestWatchAlertsOnMetrics(t *testing.T) {
	m, _ := newMetrics(t)
	var o ops.WatchObserver = m
	for _, e := range []string{ops.AlertOpen, "edited", "edited", ops.AlertResolved} {
		o.WatchAlert(e)
	}
	o.WatchSkipped()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, want := range []string{`dlqbot_watch_alerts_total{event="open"} 1`, `dlqbot_watch_alerts_total{event="edited"} 2`,
		`dlqbot_watch_alerts_total{event="resolved"} 1`, "dlqbot_watch_ticks_skipped_total 1"} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, rec.Body.String())
		}
	}
}

func TestNewWithoutRegistry(t *testing.T) {
	m := metrics.New(nil)
	m.SlackCall("auth.test", nil)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(rec.Body.String(), `dlqbot_slack_calls_total{method="auth.test",result="ok"} 1`) {
		t.Fatalf("a private registry's handler does not serve its metrics:\n%s", rec.Body.String())
	}
}

func TestNotifyIsSafeConcurrently(t *testing.T) {
	m, reg := newMetrics(t)
	ctx := context.Background()
	done := make(chan struct{})
	for g := 0; g < 8; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			id := "r_c" + string(rune('a'+g))
			m.Notify(ctx, ev(engine.EventStarted, id, engine.StateRunning, 0, 0, 0))
			for i := 1; i <= 100; i++ {
				m.Notify(ctx, ev(engine.EventStepPassed, id, engine.StateRunning, i, i, 0))
			}
			m.Notify(ctx, ev(engine.EventFinished, id, engine.StateFinished, 100, 100, 0))
		}()
	}
	for g := 0; g < 8; g++ {
		<-done
	}
	if got := value(t, reg, "dlqbot_messages_sent_total"); got != 800 {
		t.Fatalf("sent = %v, want 800", got)
	}
	if got := gauge(t, reg, "running"); got != 0 {
		t.Fatalf("running = %v, want 0", got)
	}
}
