package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/clustertest"
)

// BenchmarkLedgerWindow500 writes windows of 500 copies the way a move
// does — the window's intents, then its confirms in the mover's flushes
// of 200 — in the previous layout ("before": a JSON intent record, a JSON
// confirm record per flush and the DLQ's index per id at confirm; no
// fence, no refusal) and in the window layout ("after": one fenced,
// refusing script per window, a compact record per flush). It runs on a
// private redis-server, so that the server's command counts (INFO
// commandstats, commands run inside scripts included) are this
// benchmark's alone, and reports per window: server commands, client
// round trips, and the bytes the replay's ledger keeps in Redis. "signed"
// is the window layout with a signing key, as serve runs it (MACs of
// entries and segments, the records' seals and the ledger's tally).
//
//	go test ./store -run '^$' -bench BenchmarkLedgerWindow500 -benchtime 200x
func BenchmarkLedgerWindow500(b *testing.B) {
	if err := clustertest.Available(); err != nil {
		b.Skipf("no redis-server: %v", err)
	}
	srv := clustertest.StartServer(b)
	for _, layout := range []string{"before", "after", "signed"} {
		b.Run(layout, func(b *testing.B) {
			e := newEnvURL(b, srv.URL(), benchKey(layout))
			hook := &countHook{}
			e.rdb.AddHook(hook)
			l := e.st.Ledger()
			rid := "r_bench_" + layout
			w := lease(b, e, rid)
			const size, flush = 500, 200
			win := make([]engine.LedgerEntry, size)
			cmds0, trips0 := serverCalls(b, e.rdb), hook.cmds.Load()+hook.pipes.Load()
			b.ResetTimer()
			for i := range b.N {
				for j := range win {
					n := i*size + j
					win[j] = copyOf(entry(rid, "msg-"+strconv.Itoa(n), n), fmt.Sprintf("rd-%d", n+1))
				}
				if layout == "before" {
					if err := prevWrite(e.ctx, l, "i", win); err != nil {
						b.Fatal(err)
					}
				} else {
					w.Entries = win
					if _, err := l.IntendWindow(e.ctx, w); err != nil {
						b.Fatal(err)
					}
				}
				for start := 0; start < size; start += flush {
					batch := win[start:min(size, start+flush)]
					var err error
					if layout == "before" {
						err = prevWrite(e.ctx, l, "c", batch)
					} else {
						err = l.Confirm(e.ctx, batch)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			trips := hook.cmds.Load() + hook.pipes.Load() - trips0
			cmds := serverCalls(b, e.rdb) - cmds0 - 1 // less the INFO
			bytes := int64(0)
			for _, k := range []string{e.st.b.k.ledger(rid), e.st.b.k.acks(rid)} {
				n, _ := e.rdb.MemoryUsage(e.ctx, k, 0).Result()
				bytes += n
			}
			b.ReportMetric(float64(cmds)/float64(b.N), "redis-cmds/window")
			b.ReportMetric(float64(trips-1)/float64(b.N), "round-trips/window") // less the INFO
			b.ReportMetric(float64(bytes)/float64(b.N), "ledger-bytes/window")
		})
	}
}

// serverCalls is how many commands the server ran so far (INFO
// commandstats, commands called by scripts included).
func serverCalls(b *testing.B, rdb redis.UniversalClient) int64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		_, rest, ok := strings.Cut(line, ":calls=")
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		c, _ := strconv.ParseInt(v, 10, 64)
		n += c
	}
	return n
}

// BenchmarkLedgerRead100k reads the entries of a replay of 100,000 copies
// (windows of 250, confirms of 200) whole in the previous layout and a
// page at a time in the window layout, reporting the most entries a
// reader holds at once; "signed" is the window layout with a signing
// key.
//
//	go test ./store -run '^$' -bench BenchmarkLedgerRead100k -benchtime 3x
func BenchmarkLedgerRead100k(b *testing.B) {
	for _, layout := range []string{"before", "after", "signed"} {
		b.Run(layout, func(b *testing.B) {
			e := newEnv(b, benchKey(layout))
			l := e.st.Ledger()
			rid := "r_read_" + layout
			w := lease(b, e, rid)
			const n = 100_000
			all := make([]engine.LedgerEntry, n)
			for i := range all {
				all[i] = copyOf(entry(rid, "msg-"+strconv.Itoa(i), i), fmt.Sprintf("rd-%d", i+1))
				all[i].At = time.UnixMilli(int64(i))
			}
			for start := 0; start < n; start += 250 {
				var err error
				if layout == "before" {
					err = prevWrite(e.ctx, l, "i", all[start:start+250])
				} else {
					w.Entries = all[start : start+250]
					_, err = l.IntendWindow(e.ctx, w)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			for start := 0; start < n; start += 200 {
				var err error
				if layout == "before" {
					err = prevWrite(e.ctx, l, "c", all[start:start+200])
				} else {
					err = l.Confirm(e.ctx, all[start:start+200])
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			held := 0
			b.ResetTimer()
			for range b.N {
				got := 0
				for from := int64(0); from >= 0; {
					page, next, err := l.EntriesPage(e.ctx, rid, from)
					if err != nil {
						b.Fatal(err)
					}
					held = max(held, len(page))
					got += len(page)
					from = next
				}
				if got != n {
					b.Fatalf("%d entries, want %d", got, n)
				}
			}
			b.ReportMetric(float64(held), "max-entries-held")
		})
	}
}

// benchKey gives the "signed" layout of a benchmark the test key.
func benchKey(layout string) func(*Config) {
	return func(c *Config) {
		if layout == "signed" {
			c.SigningKey = testKey
		}
	}
}
