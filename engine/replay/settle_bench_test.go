package replay_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// BenchmarkDefaultStepsReplay measures a whole unpaced replay with the
// default steps (10, 20, 40 … up to the cap of 500), approve → finished,
// against the management UI's "Move messages" shovel on the same dead
// letters in the same run (both DLQs filled together through a fanout
// exchange, which the DLQs' taps copy). The engine has the default
// settings (a 3 s SettleGrace, steps overlapping past the canary phase).
// The replay is exact or the benchmark fails: finished, every message
// sent, none came back, the DLQ empty, the target's consumer given each
// message once; so must the shovel's.
//
//	go test ./engine -run '^$' -bench BenchmarkDefaultStepsReplay -benchtime 1x -timeout 60m
//
// DLQBOT_BENCH_REPLAY_MESSAGES sets the size (default 100,000).
func BenchmarkDefaultStepsReplay(b *testing.B) {
	n := benchEnvInt(b, "DLQBOT_BENCH_REPLAY_MESSAGES", 100000)
	on := testkit.Rabbit3
	on.Require(b)
	ev := &events{}
	e := newEnvTuned(b, replay.Config{}, on, func(d *replay.Deps) { d.Notifier = ev })
	r := e.rabbit
	ctx := context.Background()

	contenders := []string{"dlqbot", "shovel"}
	dlqs, targets := fanoutDLQs(b, r, contenders, nil, n)
	got := map[string]*idSet{}
	for _, c := range contenders {
		got[c] = newIDSet(n)
		r.Consume(targets[c], got[c].handle)
	}
	dlq := dlqs["dlqbot"]
	p, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq, To: targets["dlqbot"]}, "U_BENCH")
	if err != nil || p.Selected != n {
		b.Fatalf("preview: %v (selected %d of %d)", err, p.Selected, n)
	}

	b.ResetTimer()
	start := time.Now()
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Rate: -1}, false)
	if err != nil {
		b.Fatalf("approve: %v: %+v", err, ap.Changes)
	}
	rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner")
	if err != nil {
		b.Fatalf("run: %v", err)
	}
	took := time.Since(start)
	if rep.State != engine.StateFinished || rep.Sent != n || rep.Returned != 0 || rep.Missing != 0 || rep.Failed != 0 {
		b.Fatalf("replay %s: state %s, sent %d of %d, %d back, missing %d, failed %d: %s; want finished with all %d sent",
			rep.ID, rep.State, rep.Sent, rep.Total, rep.Returned, rep.Missing, rep.Failed, rep.Note, n)
	}
	got["dlqbot"].wait(b, dlq, r)
	start = time.Now()
	if err := on.Shovel(ctx, dlqs["shovel"], targets["shovel"]); err != nil {
		b.Fatal(err)
	}
	shovel := time.Since(start)
	got["shovel"].wait(b, dlqs["shovel"], r)
	b.StopTimer()

	steps, early := 0, 0
	var settling time.Duration
	for _, x := range ev.snapshot() {
		if x.Kind != engine.EventStepPassed || x.Step == nil {
			continue
		}
		steps++
		settling += x.Step.Duration
		if strings.Contains(x.Step.Observation, "counters show every copy delivered and acked") {
			early++
		}
	}
	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	b.ReportMetric(rate(took), "dlqbot-msgs/s")
	b.ReportMetric(rate(shovel), "shovel-msgs/s")
	b.ReportMetric(shovel.Seconds()/took.Seconds(), "ratio-dlqbot/shovel")
	b.ReportMetric(took.Seconds(), "approve-to-finished-s")
	b.ReportMetric(float64(steps), "steps")
	b.ReportMetric(float64(early), "steps-proven-early")
	if steps > 0 {
		b.ReportMetric(settling.Seconds()/float64(steps), "mean-step-s")
	}
	if os.Getenv("DLQBOT_BENCH_VERBOSE") != "" {
		b.Logf("replay note: %s", rep.Note)
	}
}

// snapshot is a copy of the events so far.
func (ev *events) snapshot() []engine.Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]engine.Event(nil), ev.es...)
}
