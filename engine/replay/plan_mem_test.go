package replay

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// BenchmarkPlanMemory measures what a run keeps per message for a whole
// replay of DLQBOT_BENCH_PLAN_ITEMS (default 1,000,000) distinct
// synthetic items in one step, the binary's whole replay: the token's
// columns as the store decodes them (ids sharing one string per chunk),
// the plan, the step's pick, what its claim keeps, and one move's copies
// reported and booked as the engine's pass books them (without the
// broker: the ids and copy tags are made as the mover makes them). It
// reports the live heap (HeapInuse after a collection) above the start,
// in bytes per message, after each phase and at the peak.
//
//	go test ./engine -run '^$' -bench BenchmarkPlanMemory -benchtime 1x
func BenchmarkPlanMemory(b *testing.B) {
	n := 1000000
	if v := os.Getenv("DLQBOT_BENCH_PLAN_ITEMS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	for range b.N {
		peak := 0.0
		base := heapInuse()
		at := func(name string) {
			v := float64(heapInuse()-base) / float64(n)
			peak = max(peak, v)
			b.ReportMetric(v, name+"-B/msg")
		}
		rn := &run{plan: engine.PlanOf(synthColumns(n), nil)}
		at("plan")
		pick := rn.plan.Next(n, true)
		rn.own.claimed = claimedOf(pick)
		at("pick")
		sentPer := map[string]int{}
		kept := &sentItems{p: rn.plan}
		mr := moveSynth(rn.plan, pick, kept.Add)
		at("moved")
		rn.stepSent = newSentSet(rn.plan)
		sent := rn.bookSent(kept, mr, sentPer)
		at("booked")
		runtime.KeepAlive(mr)
		if sent != n || mr.SentN != n || rn.plan.Remaining() != 0 {
			b.Fatalf("booked %d of %d; %d left", sent, n, rn.plan.Remaining())
		}
		b.ReportMetric(peak, "peak-B/msg")
		runtime.KeepAlive(pick)
		runtime.KeepAlive(rn)
	}
}

// heapInuse is HeapInuse after a collection.
func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// synthColumns are n distinct items in 4 classes as the store decodes
// them: each chunk of 4,096 ids shares one string of hex.
func synthColumns(n int) engine.ItemColumns {
	c := engine.ItemColumns{IDs: make([]string, 0, n), Count: make([]int32, 0, n), Seq: make([]int32, 0, n),
		Class: make([]uint32, 0, n), Classes: [][2]string{{"a.work", "g1"}, {"a.work", "g2"}, {"b.work", "g1"}, {"b.work", "g2"}}}
	for start := 0; start < n; start += 4096 {
		end := min(n, start+4096)
		hexIDs := make([]byte, 16*(end-start))
		for i := start; i < end; i++ {
			hex.Encode(hexIDs[16*(i-start):], synthID(i))
		}
		ids := string(hexIDs)
		for i := start; i < end; i++ {
			c.IDs = append(c.IDs, ids[16*(i-start):16*(i-start+1)])
			c.Count = append(c.Count, 1)
			c.Seq = append(c.Seq, int32(i))
			c.Class = append(c.Class, uint32(i%4))
		}
	}
	return c
}

// synthID is item i's 8 bytes of fingerprint.
func synthID(i int) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i)*0x9E3779B97F4A7C15)
	return b[:]
}

// claimedOf is what claim keeps of pick: its ids.
func claimedOf(pick map[string]int) []string {
	ids := make([]string, 0, len(pick))
	for id := range pick {
		ids = append(ids, id)
	}
	return ids
}

// moveSynth reports pick's copies sent as the mover does: in DLQ order,
// each with its own id string (as ParseMeta makes it) and copy tag, to
// onSent in batches of 200.
func moveSynth(p *engine.Plan, pick map[string]int, onSent func([]engine.Moved)) engine.MoveResult {
	var mr engine.MoveResult
	var batch []engine.Moved
	for i := range p.IDs {
		if pick[p.IDs[i]] == 0 {
			continue
		}
		id := hex.EncodeToString(synthID(i))
		batch = append(batch, engine.Moved{Seq: int(p.Seq[i]), ID: id, Target: p.Target(id), Copy: fmt.Sprintf("r_0123456789abcdef-%d", i+1)})
		if len(batch) == 200 || i == len(p.IDs)-1 {
			onSent(batch)
			mr.SentN += len(batch)
			batch = make([]engine.Moved, 0, 200)
		}
	}
	return mr
}
