package replay_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// timedLedger is the real ledger, timing every call.
type timedLedger struct {
	engine.Ledger
	mu    sync.Mutex
	took  map[string]time.Duration
	calls map[string]int
}

func (l *timedLedger) time(op string, start time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.took[op] += time.Since(start)
	l.calls[op]++
}

func (l *timedLedger) IntendWindow(ctx context.Context, w engine.Window) (map[string]string, error) {
	defer l.time("window", time.Now())
	return l.Ledger.IntendWindow(ctx, w)
}

func (l *timedLedger) Confirm(ctx context.Context, es []engine.LedgerEntry) error {
	defer l.time("confirm", time.Now())
	return l.Ledger.Confirm(ctx, es)
}

func (l *timedLedger) EntriesPage(ctx context.Context, id string, from int64) ([]engine.LedgerEntry, int64, error) {
	defer l.time("page", time.Now())
	return l.Ledger.EntriesPage(ctx, id, from)
}

// BenchmarkUnpacedReplayLedger times the ledger's share of a whole
// unpaced replay of 100,000 1 KB dead letters in one step: every ledger
// call (windows, confirms, the resume read) beside the replay's own run
// time in the same run. Ledger calls overlap publishing (intents are
// written a window ahead, confirms by the mover's recorder), so their sum
// is the ledger's load, not time the replay waited.
//
//	go test ./engine -run '^$' -bench BenchmarkUnpacedReplayLedger -benchtime 1x -timeout 30m
func BenchmarkUnpacedReplayLedger(b *testing.B) {
	n := benchEnvInt(b, "DLQBOT_BENCH_REPLAY_MESSAGES", 100000)
	tl := &timedLedger{took: map[string]time.Duration{}, calls: map[string]int{}}
	e := newEnvTuned(b, replay.Config{}, testkit.Rabbit3, func(d *replay.Deps) {
		tl.Ledger = d.Ledger
		d.Ledger = tl
	})
	r := e.rabbit
	ctx := context.Background()
	fan, dlq, tgt := testkit.Name("fan"), r.Queue(testkit.Name("dlq"), nil), r.Queue(testkit.Name("tgt"), nil)
	ch := r.Channel()
	if err := ch.ExchangeDeclare(fan, "fanout", true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Channel().ExchangeDelete(fan, false, false) })
	if err := ch.QueueBind(dlq, "", fan, false, nil); err != nil {
		b.Fatal(err)
	}
	fillFanout(b, r, fan, testkit.Name("src"), n)
	r.WaitCount(dlq, n, time.Minute+time.Duration(n/500)*time.Second)
	p, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq, To: tgt}, "U_BENCH")
	if err != nil || p.Selected != n {
		b.Fatalf("preview: %v, %d selected", err, p.Selected)
	}
	got := newIDSet(n)
	r.Consume(tgt, got.handle)
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Step: n, Cap: n, Rate: -1, Timeout: 5 * time.Minute}, false)
	if err != nil {
		b.Fatalf("approve: %v", err)
	}
	b.ResetTimer()
	start := time.Now()
	rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner")
	runTook := time.Since(start)
	b.StopTimer()
	if err != nil || rep.State != engine.StateFinished || rep.Sent != n {
		b.Fatalf("replay: %v, %s, %d sent: %s", err, rep.State, rep.Sent, rep.Note)
	}
	got.wait(b, dlq, r)
	var ledger time.Duration
	for op, d := range tl.took {
		ledger += d
		b.ReportMetric(d.Seconds(), op+"-s")
		b.ReportMetric(float64(tl.calls[op]), op+"-calls")
	}
	b.ReportMetric(runTook.Seconds(), "run-s")
	b.ReportMetric(ledger.Seconds(), "ledger-s")
	b.ReportMetric(ledger.Seconds()/runTook.Seconds(), "ledger/run")
	b.ReportMetric(float64(n)/runTook.Seconds(), "msgs/s")
}
