package store

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/legacytoken"
	"github.com/stroma/dlqbot/store/tokencodec"
)

// benchFrozen is a whole-DLQ preview of n fingerprint items: one target,
// three failure groups, DLQ positions in order.
func benchFrozen(n int) engine.Frozen {
	f := engine.Frozen{Token: "p_bench", DLQ: "orders.dlq", Vhost: "/", Selection: "all", Requester: "U1",
		Targets: []engine.TargetSnapshot{{Queue: "orders", Exists: true, Consumers: 1, Messages: n}}, Total: n,
		CreatedAt: time.Unix(1_800_000_000, 0).UTC(), ExpiresAt: time.Unix(1_800_086_400, 0).UTC()}
	f.Items = make([]engine.Item, n)
	for i := range f.Items {
		f.Items[i] = engine.Item{ID: fmt.Sprintf("%016x", uint64(i)*0x9e3779b97f4a7c15), Count: 1, Target: "orders",
			Group: []string{"rejected", "rejected/java.lang.IllegalStateException", "expired"}[i%3], Seq: i}
	}
	return f
}

// cpuTime is the process's user and system CPU time so far: beside wall
// time, a measure that holds on a machine loaded by other work.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// timed runs fn and returns its CPU time (the process's, so the collector's
// work on fn's garbage counts); allocated, when set, gets the bytes fn
// allocated.
func timed(fn func(), allocated ...*uint64) time.Duration {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := cpuTime()
	fn()
	took := cpuTime() - start
	runtime.ReadMemStats(&m1)
	for _, a := range allocated {
		*a = m1.TotalAlloc - m0.TotalAlloc
	}
	return took
}

// BenchmarkTokenFormats encodes and decodes a whole-DLQ preview of 100,000
// and 1,000,000 items in the binary format, the same bytes gzipped (to
// show what compression would buy) and the JSON/gzip format of earlier
// releases, and reports each one's size, the CPU time of each encode and
// decode, and the bytes a decode allocates.
//
//	go test ./store -run '^$' -bench BenchmarkTokenFormats -benchtime 1x
func BenchmarkTokenFormats(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		f := benchFrozen(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				var bin, plain, old []byte
				var zb bytes.Buffer
				var err error
				binEnc := timed(func() { bin, err = tokencodec.Encode(f) })
				if err != nil {
					b.Fatal(err)
				}
				var binAlloc, oldAlloc uint64
				binDec := timed(func() {
					var got engine.Frozen
					if got, err = tokencodec.Decode(bin); err == nil && len(got.Items) != n {
						err = fmt.Errorf("%d items", len(got.Items))
					}
				}, &binAlloc)
				if err != nil {
					b.Fatalf("decode: %v", err)
				}
				gzEnc := timed(func() {
					zw, _ := gzip.NewWriterLevel(&zb, gzip.BestSpeed)
					_, _ = zw.Write(bin)
					err = zw.Close()
				})
				gzDec := timed(func() {
					var zr *gzip.Reader
					if zr, err = gzip.NewReader(bytes.NewReader(zb.Bytes())); err == nil {
						plain, _ = io.ReadAll(zr)
						_, err = tokencodec.Decode(plain)
					}
				})
				if err != nil {
					b.Fatal(err)
				}
				oldEnc := timed(func() { old, err = legacytoken.Encode(f) })
				if err != nil {
					b.Fatal(err)
				}
				oldDec := timed(func() {
					var got engine.Frozen
					if got, err = tokencodec.Decode(old); err == nil && len(got.Items) != n {
						err = fmt.Errorf("%d items", len(got.Items))
					}
				}, &oldAlloc)
				if err != nil {
					b.Fatalf("legacy decode: %v", err)
				}

				mb := func(n int) float64 { return float64(n) / 1e6 }
				ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
				b.ReportMetric(mb(len(bin)), "binary-MB")
				b.ReportMetric(ms(binEnc), "binary-enc-cpu-ms")
				b.ReportMetric(ms(binDec), "binary-dec-cpu-ms")
				b.ReportMetric(mb(int(binAlloc)), "binary-dec-alloc-MB")
				b.ReportMetric(mb(zb.Len()), "binary+gzip-MB")
				b.ReportMetric(ms(binEnc+gzEnc), "binary+gzip-enc-cpu-ms")
				b.ReportMetric(ms(gzDec), "binary+gzip-dec-cpu-ms")
				b.ReportMetric(mb(len(old)), "json-gzip-MB")
				b.ReportMetric(ms(oldEnc), "json-gzip-enc-cpu-ms")
				b.ReportMetric(ms(oldDec), "json-gzip-dec-cpu-ms")
				b.ReportMetric(mb(int(oldAlloc)), "json-gzip-dec-alloc-MB")
			}
		})
	}
}

// BenchmarkTokenLoadHeader saves a token of 1,000,000 items in Redis and
// times Load (every item) against LoadHeader (what permission checks
// read) and LoadColumns (what a run's plan reads), with the bytes each
// of the latter two allocates.
//
//	go test ./store -run '^$' -bench BenchmarkTokenLoadHeader -benchtime 1x
func BenchmarkTokenLoadHeader(b *testing.B) {
	e := newEnv(b)
	tok, err := e.st.Tokens().Save(e.ctx, benchFrozen(1_000_000), time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		start := time.Now()
		f, err := e.st.Tokens().Load(e.ctx, tok)
		if err != nil || len(f.Items) != 1_000_000 {
			b.Fatalf("load: %d items, %v", len(f.Items), err)
		}
		load := time.Since(start)
		start = time.Now()
		h, err := e.st.Tokens().LoadHeader(e.ctx, tok)
		if err != nil || h.Distinct != 1_000_000 {
			b.Fatalf("header: %+v, %v", h, err)
		}
		head := time.Since(start)
		f.Items = nil
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start = time.Now()
		_, cols, err := e.st.Tokens().LoadColumns(e.ctx, tok)
		if err != nil || cols.Len() != 1_000_000 {
			b.Fatalf("columns: %d items, %v", cols.Len(), err)
		}
		columns := time.Since(start)
		runtime.ReadMemStats(&after)
		colAlloc := after.TotalAlloc - before.TotalAlloc
		runtime.GC()
		runtime.ReadMemStats(&before)
		f, err = e.st.Tokens().Load(e.ctx, tok)
		runtime.ReadMemStats(&after)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(load.Microseconds())/1000, "load-ms")
		b.ReportMetric(float64(head.Microseconds())/1000, "load-header-ms")
		b.ReportMetric(float64(columns.Microseconds())/1000, "load-columns-ms")
		b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/1e6, "load-alloc-MB")
		b.ReportMetric(float64(colAlloc)/1e6, "load-columns-alloc-MB")
	}
}
