package replay_test

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// BenchmarkPreview previews a classic DLQ of DLQBOT_BENCH_MESSAGES
// (default 100,000) dead letters of 1 KB, each distinct, and reports the
// rate, the process's peak RSS during the preview (VmHWM, reset after the
// queue is filled) and the Go heap's peak, and how much of the queue the
// preview read (it must be all). Compare its rate with BenchmarkScan's
// minimal reader (engine/amqp) from the same run. Run it with:
//
//	DLQBOT_BENCH_MESSAGES=1000000 go test ./engine -run '^$' -bench BenchmarkPreview -benchtime 1x -timeout 60m
func BenchmarkPreview(b *testing.B) {
	n := benchEnvInt(b, "DLQBOT_BENCH_MESSAGES", 100000)
	e := newEnvB(b)
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Queue(dlq, nil)
	died := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := 0; i < n; i += 10000 {
		msgs := make([]amqp.Publishing, min(10000, n-i))
		for j := range msgs {
			msgs[j] = testkit.Msg("m-"+strconv.Itoa(i+j), testkit.Body(i+j, 1024), testkit.DeathHeaders(src, died))
		}
		r.Publish(dlq, msgs...)
	}
	r.WaitCount(dlq, n, 10*time.Minute)
	runtime.GC()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // reset VmHWM (peak RSS)

	var peakHeap uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peakHeap = max(peakHeap, ms.HeapAlloc)
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	b.ResetTimer()
	start := time.Now()
	p, err := e.svc.Preview(context.Background(), engine.Selection{DLQ: dlq}, "U_BENCH")
	took := time.Since(start)
	b.StopTimer()
	close(stop)
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	if p.Scanned != n || !p.Coverage.Whole() {
		b.Fatalf("preview read %d of %d, coverage %+v", p.Scanned, n, p.Coverage)
	}
	b.ReportMetric(float64(n)/took.Seconds(), "msgs/s")
	b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(vmHWM())/1024, "peak-RSS-MB")
	b.ReportMetric(float64(p.Scanned), "read")
}

// vmHWM is the process's peak resident set in kB (0 when unknown).
func vmHWM() int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			v, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return v
		}
	}
	return 0
}
