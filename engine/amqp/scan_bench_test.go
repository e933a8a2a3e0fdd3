package amqp

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// BenchmarkScan compares, on the same queue in the same run, Scan (with a
// visit that only counts) against a reference reader that does nothing but
// read the queue as fast as the broker allows (one consumer at a time,
// manual ack, prefetch 65535, a second channel when the first is full) and
// give it back with Nack(0, multiple, requeue). It reports both rates, their
// ratio and the Go heap's peak during each read.
//
// The queue holds DLQBOT_BENCH_MESSAGES (default 100,000) messages of 1 KB
// with dead-letter headers; it is filled once per queue type, outside the
// timer, and deleted afterwards. Run it with:
//
//	go test ./engine/amqp -run '^$' -bench BenchmarkScan -benchtime 1x -timeout 20m
func BenchmarkScan(b *testing.B) {
	n := 100000
	if s := os.Getenv("DLQBOT_BENCH_MESSAGES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			b.Fatalf("DLQBOT_BENCH_MESSAGES=%q: want a positive integer", s)
		}
		n = v
	}
	for _, qt := range queueTypes {
		e := newEnv(b)
		name := fmt.Sprintf("t-bench-%s-%s", qt.name, randomID()[:10])
		filled := false
		b.Run(qt.name, func(b *testing.B) {
			if !filled {
				benchFill(b, e, name, qt.args, n)
				filled = true
			}
			benchScan(b, e, name, n)
		})
		if ch, err := e.conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(name, false, false, false)
			ch.Close()
		}
	}
}

// benchFill declares the queue and publishes n messages of 1 KB with
// confirms, 1000 in flight.
func benchFill(b *testing.B, e *testEnv, name string, args amqp.Table, n int) {
	b.Helper()
	ch := e.channel()
	defer ch.Close()
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		b.Fatalf("declare %s: %v", name, err)
	}
	body := make([]byte, 1024)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	start := time.Now()
	for done := 0; done < n; {
		batch := make([]amqp.Publishing, min(10000, n-done))
		for i := range batch {
			batch[i] = amqp.Publishing{
				MessageId:    fmt.Sprintf("bench-%d", done+i),
				DeliveryMode: amqp.Persistent,
				Timestamp:    time.Now(),
				Headers: amqp.Table{"x-death": []any{amqp.Table{
					"queue": "orders", "reason": "rejected", "count": int64(1),
					"time": time.Now(), "exchange": "", "routing-keys": []any{"orders"},
				}}, "x-first-death-queue": "orders"},
				Body: body,
			}
		}
		if err := publishConfirmed(e.conn, name, batch); err != nil {
			b.Fatalf("fill %s: %v", name, err)
		}
		done += len(batch)
	}
	e.waitReady(name, n)
	b.Logf("filled %s with %d messages in %v", name, n, time.Since(start).Round(time.Millisecond))
}

func benchScan(b *testing.B, e *testEnv, name string, n int) {
	broker := testBroker(b, Config{})
	ctx := context.Background()
	var ours, ref time.Duration
	var oursPeak, refPeak memPeak
	b.ResetTimer()
	for range b.N {
		count := 0
		stop := sampleMemory(&oursPeak)
		start := time.Now()
		info, err := broker.Scan(ctx, name, func(engine.Message) error { count++; return nil })
		ours += time.Since(start)
		stop()
		if err != nil || count != n || info.Read != n {
			b.Fatalf("Scan read %d (counted %d) of %d: %v", info.Read, count, n, err)
		}
		b.StopTimer()
		e.waitReady(name, n)
		b.StartTimer()

		stop = sampleMemory(&refPeak)
		start = time.Now()
		got, err := testkit.ReferenceRead(e.conn, name, n)
		ref += time.Since(start)
		stop()
		if err != nil || got != n {
			b.Fatalf("reference read %d of %d: %v", got, n, err)
		}
		b.StopTimer()
		e.waitReady(name, n)
		b.StartTimer()
	}
	total := float64(n * b.N)
	oursRate, refRate := total/ours.Seconds(), total/ref.Seconds()
	b.ReportMetric(oursRate, "msgs/s")
	b.ReportMetric(refRate, "ref-msgs/s")
	b.ReportMetric(oursRate/refRate, "ratio")
	b.ReportMetric(oursPeak.heapMB(), "peak-MB")
	b.ReportMetric(oursPeak.rssMB(), "peak-heap-sys-MB")
	b.ReportMetric(refPeak.heapMB(), "ref-peak-MB")
}

// memPeak is the largest Go heap seen while sampling.
type memPeak struct {
	heapInuse uint64
	heapSys   uint64 // HeapSys - HeapReleased: heap memory held from the OS
}

func (m memPeak) heapMB() float64 { return float64(m.heapInuse) / (1 << 20) }
func (m memPeak) rssMB() float64  { return float64(m.heapSys) / (1 << 20) }

// sampleMemory starts from a collected heap and samples runtime.MemStats
// every 10 ms until the returned stop is called, keeping the peaks in p.
func sampleMemory(p *memPeak) (stop func()) {
	runtime.GC()
	debug.FreeOSMemory()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		p.heapInuse = max(p.heapInuse, ms.HeapInuse)
		p.heapSys = max(p.heapSys, ms.HeapSys-ms.HeapReleased)
	}
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				sample()
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}
