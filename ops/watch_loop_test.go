package ops_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
	"github.com/stroma/dlqbot/store"
)

// manualClock tells the time the test sets; Run is not used with it.
type manualClock struct{ now time.Time }

func (c *manualClock) Now() time.Time                       { return c.now }
func (c *manualClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

// depths answers the queue list the test sets, or err.
type depths struct {
	m   map[string]int
	err error
}

func (d *depths) QueueDepths(context.Context) (map[string]int, error) { return d.m, d.err }

// poster records alerts as a Slack channel would show them.
type poster struct {
	mu    sync.Mutex
	posts int
	shown map[string]ops.Alert
	edits map[string]int
}

func (p *poster) PostAlert(_ context.Context, a ops.Alert) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts++
	ts := "ts" + string(rune('0'+p.posts))
	p.shown[ts] = a
	return ts, nil
}

func (p *poster) EditAlert(_ context.Context, ts string, a ops.Alert) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shown[ts] = a
	p.edits[ts]++
	return nil
}

type observed struct {
	mu      sync.Mutex
	events  []string
	skipped int
}

func (o *observed) WatchAlert(e string) { o.mu.Lock(); o.events = append(o.events, e); o.mu.Unlock() }
func (o *observed) WatchSkipped()       { o.mu.Lock(); o.skipped++; o.mu.Unlock() }

type watchEnv struct {
	clock  *manualClock
	depths *depths
	poster *poster
	obs    *observed
	trail  *testkit.Trail
	w      []*ops.Watcher
}

// newWatchEnv builds n watchers (replicas) on one Redis watching
// "orders.*.dlq", threshold 10 within 5m, with a clock the test moves.
func newWatchEnv(t *testing.T, n int) *watchEnv {
	o, _, tr := newOps(t, policy, ops.Config{})
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &watchEnv{clock: &manualClock{now: time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)}, depths: &depths{m: map[string]int{}},
		poster: &poster{shown: map[string]ops.Alert{}, edits: map[string]int{}}, obs: &observed{}, trail: tr}
	rules := []commands.WatchRule{{Queues: []string{"orders.*.dlq"}, Channel: "C0INCIDENT", Threshold: 10, Within: 5 * time.Minute}}
	for range n {
		w, err := o.NewWatcher(ops.WatchConfig{Rules: rules}, ops.WatchDeps{Depths: e.depths, Alerts: st.Alerts(), Poster: e.poster, Observer: e.obs, Clock: e.clock})
		if err != nil {
			t.Fatal(err)
		}
		e.w = append(e.w, w)
	}
	return e
}

// at sets the depths, moves the clock on by d and ticks every watcher.
func (e *watchEnv) at(d time.Duration, depth map[string]int) {
	e.clock.now = e.clock.now.Add(d)
	e.depths.m = depth
	for _, w := range e.w {
		w.Tick(context.Background())
	}
}

// TestWatcherWindowEditsAndResolution: growth slower than the window
// never alerts; 16 within five minutes does, once for two replicas; more
// arrivals edit it, at most once a second; back at the baseline it is
// resolved; an unwatched queue never alerts.
func TestWatcherWindowEditsAndResolution(t *testing.T) {
	t.Parallel()
	e := newWatchEnv(t, 2)
	e.at(0, map[string]int{"orders.eu.dlq": 0, "other.dlq": 0})
	for i := 1; i <= 4; i++ { // 4 every 3 minutes: never 10 within 5
		e.at(3*time.Minute, map[string]int{"orders.eu.dlq": 4 * i, "other.dlq": 100 * i})
	}
	if e.poster.posts != 0 {
		t.Fatalf("slow growth or an unwatched queue posted %d alerts", e.poster.posts)
	}
	e.at(time.Minute, map[string]int{"orders.eu.dlq": 20})
	e.at(time.Minute, map[string]int{"orders.eu.dlq": 28})
	if e.poster.posts != 1 {
		t.Fatalf("%d alerts posted, want 1", e.poster.posts)
	}
	a := e.poster.shown["ts1"]
	if a.State != ops.AlertOpen || a.Baseline != 12 || a.Arrived != 16 || a.Channel != "C0INCIDENT" || a.DLQ != "orders.eu.dlq" {
		t.Fatalf("alert %+v, want 16 arrived over a baseline of 12 (the low within the 5m before)", a)
	}
	e.at(time.Minute, map[string]int{"orders.eu.dlq": 40})
	if a := e.poster.shown["ts1"]; a.Arrived != 28 || e.poster.edits["ts1"] != 1 {
		t.Fatalf("after 12 more: arrived %d, %d edits; want 28 and 1 edit", a.Arrived, e.poster.edits["ts1"])
	}
	e.at(500*time.Millisecond, map[string]int{"orders.eu.dlq": 45})
	if e.poster.edits["ts1"] != 1 {
		t.Fatal("edited twice within a second")
	}
	e.at(time.Second, map[string]int{"orders.eu.dlq": 45})
	if a := e.poster.shown["ts1"]; a.Arrived != 33 || e.poster.edits["ts1"] != 2 {
		t.Fatalf("a second later: arrived %d, %d edits", a.Arrived, e.poster.edits["ts1"])
	}
	e.at(time.Minute, map[string]int{"orders.eu.dlq": 12})
	if a := e.poster.shown["ts1"]; a.State != ops.AlertResolved || e.poster.edits["ts1"] != 3 {
		t.Fatalf("back at the baseline: %+v after %d edits", a, e.poster.edits["ts1"])
	}
	if len(e.trail.Find("watch", audit.OpAlert, "")) != 1 || len(e.trail.Find("watch", audit.OpAlertResolved, "")) != 1 {
		t.Errorf("audit trail: %d alerts, %d resolutions; want 1 each", len(e.trail.Find("watch", audit.OpAlert, "")), len(e.trail.Find("watch", audit.OpAlertResolved, "")))
	}
	if got := strings.Join(e.obs.events, ","); got != "open,edited,edited,resolved" {
		t.Errorf("counted %q", got)
	}
}

// TestWatcherSnoozeAndSkippedTicks: Snooze needs read on the DLQ, edits
// the open alert to snoozed and keeps new arrivals from alerting; a tick
// whose queue list fails changes nothing and is counted.
func TestWatcherSnoozeAndSkippedTicks(t *testing.T) {
	t.Parallel()
	e := newWatchEnv(t, 1)
	e.at(0, map[string]int{"orders.us.dlq": 0})
	e.at(time.Minute, map[string]int{"orders.us.dlq": 30})
	if e.poster.posts != 1 {
		t.Fatalf("%d alerts", e.poster.posts)
	}
	ctx := context.Background()
	if _, err := e.w[0].Snooze(ctx, ops.SlackCaller("U0NOBODY01"), "orders.us.dlq"); err == nil {
		t.Fatal("someone without read snoozed the DLQ")
	}
	until, err := e.w[0].Snooze(ctx, ops.SlackCaller("U0VIEWER01"), "orders.us.dlq")
	if err != nil || !until.Equal(e.clock.now.Add(time.Hour)) {
		t.Fatalf("Snooze = %s, %v", until, err)
	}
	if a := e.poster.shown["ts1"]; a.State != ops.AlertSnoozed || a.By != "U0VIEWER01" {
		t.Fatalf("snoozed alert %+v", a)
	}
	e.at(time.Minute, map[string]int{"orders.us.dlq": 0})
	e.at(time.Minute, map[string]int{"orders.us.dlq": 50})
	if e.poster.posts != 1 {
		t.Fatalf("a snoozed DLQ alerted again: %d posts", e.poster.posts)
	}
	if es := e.trail.Find("", audit.OpSnooze, ""); len(es) != 3 || es[0].Outcome != audit.OutcomeRefused ||
		es[1].Outcome != audit.OutcomeBegun || es[2].Outcome != audit.OutcomeOK {
		t.Errorf("snooze entries %+v", es)
	}
	e.depths.err = errors.New("management API: 503")
	e.at(time.Minute, nil)
	if e.obs.skipped != 1 {
		t.Errorf("skipped ticks counted %d, want 1", e.obs.skipped)
	}
}
