package replay_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/internal/tune"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// BenchmarkPreviewApproveStep measures dlqbot alone on one classic DLQ of
// DLQBOT_BENCH_REPLAY_MESSAGES (default 100,000) 1 KB dead letters: the
// preview, the approval (which reads the DLQ to compare it with the
// preview) and the whole replay in one unpaced step, each with its wall
// time, and the process's peak RSS (VmHWM, reset before the preview and
// again before the approval) and CPU time. The replay must be exact: every
// message to the target once, the DLQ empty.
//
//	go test ./engine -run '^$' -bench BenchmarkPreviewApproveStep -benchtime 1x -timeout 30m
//
// It is the figure docs/benchmarks.md gives for the compact tokens and
// plans; run the same file on an earlier commit for the before.
func BenchmarkPreviewApproveStep(b *testing.B) {
	n := benchEnvInt(b, "DLQBOT_BENCH_REPLAY_MESSAGES", 100000)
	testkit.Rabbit3.Require(b)
	e := newEnvOn(b, replay.Config{}, testkit.Rabbit3)
	r := e.rabbit
	ctx := context.Background()
	fan := testkit.Name("fan")
	ch := r.Channel()
	if err := ch.ExchangeDeclare(fan, "fanout", true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Channel().ExchangeDelete(fan, false, false) })
	dlq, target := r.Queue(testkit.Name("dlq"), nil), r.Queue(testkit.Name("tgt"), nil)
	r.DeleteTapAfter(dlq)
	if err := ch.QueueBind(dlq, "", fan, false, nil); err != nil {
		b.Fatal(err)
	}
	fillFanout(b, r, fan, testkit.Name("src"), n)
	r.WaitCount(dlq, n, time.Minute+time.Duration(n/500)*time.Second)
	got := newIDSet(n)
	r.Consume(target, got.handle)

	resetPeak := func() {
		runtime.GC()
		debug.FreeOSMemory()
		_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // reset VmHWM (peak RSS)
	}
	b.ResetTimer()
	resetPeak()
	cpu0 := processCPU()
	start := time.Now()
	p, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq, To: target}, "U_BENCH")
	previewTook := time.Since(start)
	previewRSS := vmHWM()
	if err != nil {
		b.Fatal(err)
	}
	if p.Selected != n || !p.Coverage.Whole() {
		b.Fatalf("preview selected %d, coverage %+v; want all %d", p.Selected, p.Coverage, n)
	}
	resetPeak()
	cpu1 := processCPU()
	start = time.Now()
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Step: n, Cap: n, Rate: -1, Timeout: 5 * time.Minute}, false)
	if err != nil {
		b.Fatalf("approve: %v: %+v", err, ap.Changes)
	}
	approveTook := time.Since(start)
	start = time.Now()
	rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner")
	if err != nil {
		b.Fatalf("run: %v", err)
	}
	runTook := time.Since(start)
	replayRSS := vmHWM()
	cpu2 := processCPU()
	b.StopTimer()
	if rep.State != engine.StateFinished || rep.Sent != n || rep.Missing != 0 || rep.Failed != 0 {
		b.Fatalf("replay %s: state %s, sent %d of %d, missing %d, failed %d: %s", rep.ID, rep.State, rep.Sent, n, rep.Missing, rep.Failed, rep.Note)
	}
	got.wait(b, dlq, r)

	b.ReportMetric(previewTook.Seconds(), "preview-s")
	b.ReportMetric(approveTook.Seconds(), "approve-s")
	b.ReportMetric(runTook.Seconds(), "step-s")
	b.ReportMetric(float64(previewRSS)/1024, "preview-peak-RSS-MB")
	b.ReportMetric(float64(replayRSS)/1024, "approve+step-peak-RSS-MB")
	b.ReportMetric((cpu1 - cpu0).Seconds(), "preview-cpu-s")
	b.ReportMetric((cpu2 - cpu1).Seconds(), "approve+step-cpu-s")
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkApproveToFirstCopy measures, on one classic DLQ of
// DLQBOT_BENCH_REPLAY_MESSAGES (default 100,000) 1 KB dead letters on
// RabbitMQ 3.10, the time from Approve to the first copy at the target's
// consumer, by both paths in the same run: the approval that proves from
// the broker's counts that nothing previewed left the DLQ (issue 23, no
// read), and the approval that reads the whole DLQ to compare it
// (Config.Tune.CompareAlways, the path before). Each approval comes after the
// management statistics caught up with its preview (as a person's click
// does; with DLQBOT_BENCH_APPROVE_AT_ONCE=1, the moment the preview
// returns, its give-backs still landing); its first step is 10 copies,
// then the replay is cancelled and the next path previews what is left.
// DLQBOT_BENCH_PROOF_ONLY=1 measures the proof's path alone.
//
//	go test ./engine -run '^$' -bench BenchmarkApproveToFirstCopy -benchtime 1x -timeout 30m
func BenchmarkApproveToFirstCopy(b *testing.B) {
	n := benchEnvInt(b, "DLQBOT_BENCH_REPLAY_MESSAGES", 100000)
	atOnce := os.Getenv("DLQBOT_BENCH_APPROVE_AT_ONCE") != ""
	testkit.Rabbit3.Require(b)
	var deps replay.Deps
	e := newEnvTuned(b, replay.Config{}, testkit.Rabbit3, func(d *replay.Deps) { deps = *d })
	r := e.rabbit
	ctx := context.Background()
	fan := testkit.Name("fan")
	ch := r.Channel()
	if err := ch.ExchangeDeclare(fan, "fanout", true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Channel().ExchangeDelete(fan, false, false) })
	dlq, target := r.Queue(testkit.Name("dlq"), nil), r.Queue(testkit.Name("tgt"), nil)
	r.DeleteTapAfter(dlq)
	if err := ch.QueueBind(dlq, "", fan, false, nil); err != nil {
		b.Fatal(err)
	}
	fillFanout(b, r, fan, testkit.Name("src"), n)
	r.WaitCount(dlq, n, time.Minute+time.Duration(n/500)*time.Second)
	var got atomic.Int64
	r.Consume(target, func(amqp.Delivery) string { got.Add(1); return "ack" })
	old, err := replay.New(replay.Config{Tune: tune.Knobs{CompareAlways: true}}, deps)
	if err != nil {
		b.Fatal(err)
	}
	type approvalPath struct {
		metric string
		svc    *replay.Service
	}
	paths := []approvalPath{{"proof-approve-to-first-copy-s", e.svc}, {"compare-approve-to-first-copy-s", old}}
	if os.Getenv("DLQBOT_BENCH_PROOF_ONLY") != "" {
		paths = paths[:1] // the compare of 1,000,000 takes minutes more
	}
	b.ResetTimer()
	for _, path := range paths {
		left := r.Count(dlq)
		p, err := path.svc.Preview(ctx, engine.Selection{DLQ: dlq, To: target}, "U_BENCH")
		if err != nil || p.Selected != left {
			b.Fatalf("preview: %v, selected %d of %d", err, p.Selected, left)
		}
		if !atOnce {
			b.StopTimer()
			// A preview of 1,000,000 on a slow machine gives back for
			// minutes after it returns (BenchmarkWholeReplay's wait).
			returned := time.Now()
			testkit.Eventually(b, 10*time.Minute, "the preview's give-backs in the DLQ", func() bool { return r.Count(dlq) == left })
			since := time.Now()
			testkit.Eventually(b, 2*time.Minute, "the DLQ's statistics after the preview", func() bool {
				cs, err := e.broker.Counters(ctx, dlq)
				return err == nil && cs.SampledAt.After(since.Add(7*time.Second)) && cs.Unacked == 0 && cs.Ready == left
			})
			// The click's wait: a person approving sooner meets the
			// give-backs still landing (DLQBOT_BENCH_APPROVE_AT_ONCE).
			b.Logf("%s: the preview's give-backs landed %v after it returned; the statistics %v after that", path.metric,
				since.Sub(returned).Round(time.Millisecond), time.Since(since).Round(time.Millisecond))
			b.StartTimer()
		}
		before := got.Load()
		start := time.Now()
		ap, err := replay.Approve(path.svc, ctx, p.Token, "U_APP", engine.Params{Step: 10, Cap: 10, Rate: -1, Timeout: time.Minute}, false)
		if err != nil {
			b.Fatalf("approve: %v: %+v", err, ap.Changes)
		}
		approved := time.Since(start)
		done := make(chan engine.Replay, 1)
		go func() { rep, _ := path.svc.Run(context.Background(), ap.Replay.ID, "owner"); done <- rep }()
		testkit.Eventually(b, 10*time.Minute, "the first copy at the target", func() bool { return got.Load() > before })
		took := time.Since(start)
		if _, err := path.svc.Control(ctx, ap.Replay.ID, engine.ControlCancel, "U_BENCH"); err != nil {
			b.Logf("cancel: %v", err)
		}
		<-done
		b.Logf("%s: approval %v, first copy %v after Approve (%d messages)", path.metric, approved.Round(time.Millisecond), took.Round(time.Millisecond), left)
		b.ReportMetric(took.Seconds(), path.metric)
	}
}

// BenchmarkApprovalStoreWork measures the approval's per-id Redis work
// alone, on DLQBOT_BENCH_REPLAY_MESSAGES (default 100,000) previewed ids
// that no replay has touched: the ledger's history and the claims'
// holders (read while the broker is asked for the proof, so the longer of
// the two counts), then the new replay's ownership of every id (after the
// proof: only an approval that goes ahead owns anything). That was the
// approval's store work before the claims' summary; now an approval with
// no live replay on its DLQ reads the summary instead of the history and
// the holders (summary-s, read on a DLQ whose claims hold the n ids) and
// owns its first DefaultOwnAtApproval ids (own-at-approval-s; its runs
// own the rest beside their first steps). It is what an approval of an
// unchanged preview costs besides the proof's few management calls and
// the token's decode.
//
//	DLQBOT_BENCH_REPLAY_MESSAGES=1000000 go test ./engine -run '^$' -bench BenchmarkApprovalStoreWork -benchtime 1x
func BenchmarkApprovalStoreWork(b *testing.B) {
	n := benchEnvInt(b, "DLQBOT_BENCH_REPLAY_MESSAGES", 100000)
	rdb, prefix := testkit.Redis(b)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, engine.SystemClock{})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("fp:%016x", i)
	}
	ctx := context.Background()
	dlq := testkit.Name("dlq")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := st.Ledger().History(ctx, dlq, ids); err != nil {
			b.Fatal(err)
		}
		hist := time.Since(start)
		start = time.Now()
		if _, err := st.Claims().Holders(ctx, dlq, "", ids); err != nil {
			b.Fatal(err)
		}
		holders := time.Since(start)
		start = time.Now()
		if _, _, err := st.Claims().Own(ctx, dlq, engine.NewReplayID(), ids, time.Now(), false, nil); err != nil {
			b.Fatal(err)
		}
		own := time.Since(start)
		start = time.Now()
		if _, known, err := st.Claims().Summary(ctx, dlq); err != nil || !known {
			b.Fatalf("summary: %v (known %v)", err, known)
		}
		summary := time.Since(start)
		start = time.Now()
		if _, _, err := st.Claims().Own(ctx, testkit.Name("dlq"), engine.NewReplayID(), ids[:min(n, engine.DefaultOwnAtApproval)], time.Now(), false, nil); err != nil {
			b.Fatal(err)
		}
		ownFirst := time.Since(start)
		b.ReportMetric(hist.Seconds(), "history-s")
		b.ReportMetric(holders.Seconds(), "holders-s")
		b.ReportMetric(own.Seconds(), "own-s")
		b.ReportMetric(summary.Seconds(), "summary-s")
		b.ReportMetric(ownFirst.Seconds(), "own-at-approval-s")
	}
}
