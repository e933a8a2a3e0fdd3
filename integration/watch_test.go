package integration_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
)

// alerts returns the watch alerts posted in the channel.
func (e *env) alerts() []slackstub.Message {
	var out []slackstub.Message
	for _, m := range e.stub.Messages(channel) {
		if strings.Contains(m.Content(), "new dead letters") {
			out = append(out, m)
		}
	}
	return out
}

// TestWatchAlertsOncePreviewsAndResolves: two watchers (replicas)
// against one Redis; 30 dead letters arriving in a watched DLQ post one
// alert whose Preview button posts a preview; 30 more edit the same
// message; a replay draining the DLQ edits it to resolved, naming the
// replay. Alert and resolution are in the audit trail once each.
func TestWatchAlertsOncePreviewsAndResolves(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, watchAlertsOnce)
}

func watchAlertsOnce(t *testing.T, on testkit.Broker) {
	src, dlq := testkit.Name("src"), testkit.Name("wdlq")
	e := newEnv(t, options{on: on, policy: `
roles:
  - name: sre
    users: [U0SRE]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
watch:
  - queues: ["` + dlq + `"]
    channel: ` + channel + `
    threshold: 10
    within: 5m
`})
	e.rabbit.Topology(src, dlq, nil)
	b, err := amqp.New(amqp.Config{URL: on.AMQPURL, ManagementURL: on.ManagementURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := range 2 {
		w, err := e.ops.NewWatcher(ops.WatchConfig{Rules: e.ops.Policy().Watch, Tick: 300 * time.Millisecond},
			ops.WatchDeps{Depths: b, Alerts: e.store.Alerts(), Poster: e.bot})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			e.bot.SetSnoozer(w)
		}
		w.Tick(ctx) // the empty DLQ: the baseline
		wg.Add(1)
		go func() { defer wg.Done(); w.Run(ctx) }()
	}

	e.rabbit.Reject(src, testkit.Msgs(30, 200)...)
	testkit.Eventually(t, 60*time.Second, "one alert", func() bool { return len(e.alerts()) > 0 })
	alert := e.alerts()[0]
	if v := buttonValue(alert.RawBlocks, blocks.ActionWatchPreview); v != dlq {
		t.Fatalf("the alert's Preview button carries %q, want %q: %s", v, dlq, alert.RawBlocks)
	}
	if !strings.Contains(alert.Content(), dlq) || buttonValue(alert.RawBlocks, blocks.ActionSnooze) != dlq {
		t.Fatalf("alert %q", alert.Content())
	}
	e.click("U0SRE", blocks.ActionWatchPreview, dlq, alert.TS)
	e.waitPreview(1)

	e.rabbit.Reject(src, testkit.Msgs(30, 200)...)
	testkit.Eventually(t, 60*time.Second, "the alert edited to 60", func() bool {
		m, _ := e.stub.Message(channel, alert.TS)
		return strings.Contains(m.Content(), "60 new dead letters")
	})
	if m, _ := e.stub.Message(channel, alert.TS); m.Edits() < 1 {
		t.Fatalf("the alert shows 60 but was not edited: %q", m.Content())
	}

	// Drain it: preview again from the alert, approve, the consumer acks.
	e.rabbit.Consume(src, func(rmq.Delivery) string { return "ack" })
	e.click("U0SRE", blocks.ActionWatchPreview, dlq, alert.TS)
	preview, token := e.waitPreview(2)
	e.click("U0SRE", blocks.ActionApprove, token, preview.TS)
	e.waitProgress(preview.TS, "Finished", 90*time.Second)
	rs := e.replays()
	if len(rs) != 1 {
		t.Fatalf("%d replays, want 1", len(rs))
	}
	testkit.Eventually(t, 60*time.Second, "the alert resolved", func() bool {
		m, _ := e.stub.Message(channel, alert.TS)
		return strings.Contains(m.Content(), "Resolved")
	})
	m, _ := e.stub.Message(channel, alert.TS)
	if !strings.Contains(m.Content(), rs[0].ID) {
		t.Fatalf("the resolved alert does not name the replay %s: %q", rs[0].ID, m.Content())
	}
	if buttonValue(m.RawBlocks, blocks.ActionWatchPreview) != "" {
		t.Fatal("the resolved alert still has its Preview button")
	}
	if n := len(e.alerts()); n != 1 {
		t.Fatalf("%d alerts posted by two watchers, want 1", n)
	}
	if n := len(e.trail.Find("watch", audit.OpAlert, audit.OutcomeOK)); n != 1 {
		t.Errorf("%d alert entries in the audit trail, want 1", n)
	}
	if n := len(e.trail.Find("watch", audit.OpAlertResolved, audit.OutcomeOK)); n != 1 {
		t.Errorf("%d resolution entries in the audit trail, want 1", n)
	}
}

// TestWatchSnoozeButton: the alert's Snooze 1h button edits it to
// snoozed, and more dead letters post no new alert.
func TestWatchSnoozeButton(t *testing.T) {
	t.Parallel()
	src, dlq := testkit.Name("src"), testkit.Name("sdlq")
	e := newEnv(t, options{policy: `
roles:
  - name: sre
    users: [U0SRE]
    grants:
      - queues: ["*"]
        actions: [read]
watch:
  - queues: ["` + dlq + `"]
    channel: ` + channel + `
`})
	e.rabbit.Topology(src, dlq, nil)
	b, err := amqp.New(amqp.Config{URL: testkit.Rabbit3.AMQPURL, ManagementURL: testkit.Rabbit3.ManagementURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	w, err := e.ops.NewWatcher(ops.WatchConfig{Rules: e.ops.Policy().Watch, Tick: 300 * time.Millisecond},
		ops.WatchDeps{Depths: b, Alerts: e.store.Alerts(), Poster: e.bot})
	if err != nil {
		t.Fatal(err)
	}
	e.bot.SetSnoozer(w)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	w.Tick(ctx)
	go func() { defer close(done); w.Run(ctx) }()

	e.rabbit.Reject(src, testkit.Msgs(30, 200)...)
	testkit.Eventually(t, 60*time.Second, "one alert", func() bool { return len(e.alerts()) > 0 })
	alert := e.alerts()[0]
	// The stand-in shows the alert a moment before the watcher's post
	// returns and it records the message: a click before that finds no
	// message to edit.
	testkit.Eventually(t, 10*time.Second, "the watcher to record its alert", func() bool {
		rec, ok, err := e.store.Alerts().Get(context.Background(), dlq)
		return err == nil && ok && rec.TS == alert.TS
	})
	e.click("U0SRE", blocks.ActionSnooze, dlq, alert.TS)
	testkit.Eventually(t, 20*time.Second, "the alert snoozed", func() bool {
		m, _ := e.stub.Message(channel, alert.TS)
		return strings.Contains(m.Content(), "Snoozed")
	})
	if m, _ := e.stub.Message(channel, alert.TS); buttonValue(m.RawBlocks, blocks.ActionSnooze) != "" {
		t.Fatal("the snoozed alert still has its buttons")
	}
	e.rabbit.Reject(src, testkit.Msgs(30, 200)...)
	e.rabbit.WaitCount(dlq, 60, 20*time.Second)
	// The management API's figure lags the broker's by its statistics
	// interval (5 s): give the watcher 20 s of ticks to see 60.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if n := len(e.alerts()); n != 1 {
			t.Fatalf("%d alerts after the snooze, want the one", n)
		}
		time.Sleep(200 * time.Millisecond) // polling interval, not synchronisation
	}
	if n := len(e.trail.Find("slack", audit.OpSnooze, audit.OutcomeOK)); n != 1 {
		t.Errorf("%d snooze entries in the audit trail, want 1", n)
	}
}
