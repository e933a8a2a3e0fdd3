package engine_test

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
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
	e := newEnvOn(b, engine.Config{}, testkit.Rabbit3)
	r := e.rabbit
	ctx := context.Background()
	fan := testkit.Name("fan")
	ch := r.Channel()
	if err := ch.ExchangeDeclare(fan, "fanout", true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Channel().ExchangeDelete(fan, false, false) })
	dlq, target := r.Queue(testkit.Name("dlq"), nil), r.Queue(testkit.Name("tgt"), nil)
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
	ap, err := e.svc.Approve(ctx, p.Token, "U_APP", engine.Params{Step: n, Cap: n, Rate: -1, Timeout: 5 * time.Minute}, false)
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
