package replay_test

import (
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"time"
)

// heapPeak samples the live heap (the bytes the last GC kept) every
// 200 ms while a benchmark phase runs, so that the engine's own memory
// can be told from the process's RSS (which also counts what the GC has
// not yet returned to the OS). With DLQBOT_BENCH_HEAPPROFILE set, it
// writes a heap profile to that path each time the live heap reaches a
// new peak: the profile shows what held the memory at the peak.
type heapPeak struct {
	stop chan struct{}
	done sync.WaitGroup
	mu   sync.Mutex
	peak uint64
}

// liveHeap is the runtime's /gc/heap/live:bytes.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// startHeapPeak begins sampling.
func startHeapPeak() *heapPeak {
	h := &heapPeak{stop: make(chan struct{})}
	path := os.Getenv("DLQBOT_BENCH_HEAPPROFILE")
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
			v := liveHeap()
			h.mu.Lock()
			newPeak := v > h.peak
			if newPeak {
				h.peak = v
			}
			h.mu.Unlock()
			if newPeak && path != "" {
				if f, err := os.Create(path); err == nil {
					_ = pprof.Lookup("heap").WriteTo(f, 0)
					_ = f.Close()
				}
			}
		}
	}()
	return h
}

// end stops sampling and reports the peak live heap in MB.
func (h *heapPeak) end() float64 {
	close(h.stop)
	h.done.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	return float64(h.peak) / (1 << 20)
}
