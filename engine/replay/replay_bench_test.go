package replay_test

import (
	"context"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// BenchmarkWholeReplay measures, on the same dead letters in the same run,
// a whole replay of a DLQ in one unpaced step against the references: a
// minimal confirm-then-ack mover (copying messages unchanged, and again
// writing the three headers a replay adds) and the management UI's "Move
// messages" shovel, run twice: right before dlqbot's approval and right
// after its replay, so that its own spread and the order are in the
// figures. Each DLQ is filled with the same dead letters right before its
// contender moves it (DLQBOT_BENCH_FILL=together: all at once), and each
// reference's DLQ is read whole and given back twice first, as dlqbot's is
// by the reference reader and its preview (DLQBOT_BENCH_FRESH=1: not). Before the replay it also
// times dlqbot's preview of the DLQ (rate, peak RSS, how much it read)
// against the minimal reader on the same queue.
//
// Memory: the process's peak RSS (VmHWM) over the preview, and over the
// approval and replay; and over the latter the peak live heap (the bytes a
// collection kept: the engine's own memory, without what the collector
// has not returned yet; DLQBOT_BENCH_HEAPPROFILE=<file> writes a heap
// profile at each new peak). Run with GOMEMLIMIT set as the binary sets it
// (cmd/dlqbot/memlimit.go) to see the RSS a deployment gets.
//
// dlqbot's replay is exact or the benchmark fails: finished, sent == total,
// nothing missing, the DLQ empty, and the target's consumer given each
// message once. Each reference's target consumer must get every message too.
//
//	DLQBOT_BENCH_REPLAY_MESSAGES=1000000 go test ./engine -run '^$' -bench BenchmarkWholeReplay -benchtime 1x -timeout 150m
//
// DLQBOT_BENCH_WINDOW=<n> sets dlqbot's confirm window (Config.Tune.Window;
// default 500) to see what a wider one buys, and DLQBOT_BENCH_CHUNK=<n> its
// chunk (Config.Tune.StepChunk; default engine.DefaultStepChunk). DLQBOT_BENCH_LOG=1 writes the engine's log to stderr. DLQBOT_BENCH_BROKER=rabbit4 runs it on RabbitMQ 4 and
// DLQBOT_BENCH_QUEUE=quorum on quorum DLQs (default: RabbitMQ 3.10, classic).
func BenchmarkWholeReplay(b *testing.B) {
	n := benchEnvInt(b, "DLQBOT_BENCH_REPLAY_MESSAGES", 100000)
	on := testkit.Rabbit3
	if os.Getenv("DLQBOT_BENCH_BROKER") == testkit.Rabbit4.Name {
		on = testkit.Rabbit4
	}
	var dlqArgs amqp.Table
	if os.Getenv("DLQBOT_BENCH_QUEUE") == "quorum" {
		dlqArgs = testkit.Quorum(nil)
	}
	on.Require(b)
	var cfg replay.Config
	if w := os.Getenv("DLQBOT_BENCH_WINDOW"); w != "" {
		cfg.Tune.Window, _ = strconv.Atoi(w)
	}
	if c := os.Getenv("DLQBOT_BENCH_CHUNK"); c != "" {
		cfg.Tune.StepChunk, _ = strconv.Atoi(c)
	}
	if os.Getenv("DLQBOT_BENCH_LOG") != "" {
		cfg.Log = zerolog.New(os.Stderr).Level(zerolog.InfoLevel) // the cursor's opens and releases, warnings
	}
	e := newEnvOn(b, cfg, on)
	r := e.rabbit
	ctx := context.Background()

	// The shovel runs twice, on copies of its own: right before dlqbot's
	// approval and right after its replay, so that dlqbot's ratio is read
	// against the shovel on each side of it (their geometric mean, too):
	// the broker's state moves between contenders (at 100,000 the same
	// shovel once ran 1.56× slower third than first).
	contenders := []string{"dlqbot", "shovel", "minimal-mover", "minimal-mover+replay-headers", "shovel-before"}
	dlqs, targets, fill := contenderDLQs(b, r, contenders, dlqArgs, n, os.Getenv("DLQBOT_BENCH_FILL") == "together")
	dlq := dlqs["dlqbot"]
	got := map[string]*idSet{}
	for _, c := range contenders {
		got[c] = newIDSet(n)
		r.Consume(targets[c], got[c].handle)
	}
	took := map[string]time.Duration{}
	cpu := map[string]cpuMark{}
	// Each reference meets its DLQ as dlqbot meets its own: read whole and
	// given back twice (dlqbot's by the reference reader and the preview),
	// which moves most of a large classic queue's messages out of the
	// broker's memory. DLQBOT_BENCH_FRESH=1 moves fresh DLQs instead, as
	// before 2026-12-05's second run (not a like-for-like comparison).
	fresh := os.Getenv("DLQBOT_BENCH_FRESH") != ""
	prime := func(c string) {
		b.Helper()
		if fresh {
			return
		}
		start := time.Now()
		for range 2 {
			if got, err := testkit.ReferenceRead(r.Conn, dlqs[c], n); err != nil || got != n {
				b.Fatalf("%s: read before moving: %d of %d: %v", c, got, n, err)
			}
			r.WaitCount(dlqs[c], n, time.Minute+time.Duration(n/500)*time.Second)
		}
		b.Logf("%s's DLQ read whole and given back twice in %v", c, time.Since(start).Round(time.Second))
	}
	fill("shovel-before")
	prime("shovel-before")
	start := time.Now()
	mark := cpuNow()
	if err := on.Shovel(ctx, dlqs["shovel-before"], targets["shovel-before"]); err != nil {
		b.Fatalf("shovel-before: %v", err)
	}
	took["shovel-before"] = time.Since(start)
	cpu["shovel-before"] = mark.since()
	got["shovel-before"].wait(b, dlqs["shovel-before"], r)

	// The preview, against the minimal reader on the same queue.
	fill("dlqbot")
	start = time.Now()
	if got, err := testkit.ReferenceRead(r.Conn, dlq, n); err != nil || got != n {
		b.Fatalf("reference read %d of %d: %v", got, n, err)
	}
	refRead := time.Since(start)
	r.WaitCount(dlq, n, time.Minute+time.Duration(n/500)*time.Second)
	runtime.GC()
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // reset VmHWM (peak RSS)
	b.ResetTimer()
	start = time.Now()
	p, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq, To: targets["dlqbot"]}, "U_BENCH")
	previewTook := time.Since(start)
	previewRSS := vmHWM()
	if err != nil {
		b.Fatal(err)
	}
	if p.Selected != n || p.Coverage.Read != n || !p.Coverage.Whole() {
		b.Fatalf("preview selected %d, coverage %+v; want all %d read", p.Selected, p.Coverage, n)
	}

	// The click comes once the preview's give-backs have landed and the
	// management statistics show it (as a person's click after reading
	// the preview does; BenchmarkApproveToFirstCopy's rule), or with
	// DLQBOT_BENCH_APPROVE_AT_ONCE=1 the moment the preview returns.
	// giveback-s is how long after the preview returned its DLQ was whole
	// again (its ready count, by passive declare).
	gaveBack := time.Duration(0)
	if os.Getenv("DLQBOT_BENCH_APPROVE_AT_ONCE") == "" {
		since := time.Now()
		testkit.Eventually(b, 10*time.Minute, "the preview's give-backs in the DLQ", func() bool { return r.Count(dlq) == n })
		gaveBack = time.Since(since)
		testkit.Eventually(b, 2*time.Minute, "the DLQ's statistics after the preview", func() bool {
			cs, err := e.broker.Counters(ctx, dlq)
			return err == nil && cs.SampledAt.After(since.Add(7*time.Second)) && cs.Unacked == 0 && cs.Ready == n
		})
	}

	// dlqbot's replay: approval (which proves the DLQ unchanged since the
	// preview, or compares) and one unpaced step.
	runtime.GC()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	heap := startHeapPeak()
	start = time.Now()
	mark = cpuNow()
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
	cpu["dlqbot"] = mark.since()
	replayRSS := vmHWM()
	replayHeap := heap.end()
	if rep.State != engine.StateFinished || rep.Sent != n || rep.Total != n || rep.Missing != 0 || rep.Failed != 0 {
		b.Fatalf("replay %s: state %s, sent %d of %d, missing %d, failed %d: %s; want finished with all %d sent",
			rep.ID, rep.State, rep.Sent, rep.Total, rep.Missing, rep.Failed, rep.Note, n)
	}
	got["dlqbot"].wait(b, dlq, r)

	// The other references, one after the other, on their own copies.
	move := map[string]func(src, dst string) error{
		"minimal-mover": func(src, dst string) error { return testkit.MinimalMove(ctx, r.Conn, src, dst, n, 500, nil) },
		"minimal-mover+replay-headers": func(src, dst string) error {
			return testkit.MinimalMove(ctx, r.Conn, src, dst, n, 500, testkit.ReplayHeaders(src))
		},
		"shovel": func(src, dst string) error { return on.Shovel(ctx, src, dst) },
	}
	for _, c := range contenders[1:4] {
		fill(c)
		prime(c)
		start = time.Now()
		mark = cpuNow()
		if err := move[c](dlqs[c], targets[c]); err != nil {
			b.Fatalf("%s: %v", c, err)
		}
		took[c] = time.Since(start)
		cpu[c] = mark.since()
		got[c].wait(b, dlqs[c], r)
	}
	b.StopTimer()

	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	b.ReportMetric(rate(previewTook), "preview-msgs/s")
	b.ReportMetric(rate(refRead), "ref-read-msgs/s")
	b.ReportMetric(float64(p.Coverage.Read), "preview-read")
	b.ReportMetric(float64(previewRSS)/1024, "preview-peak-RSS-MB")
	b.ReportMetric(approveTook.Seconds(), "approve-s")
	b.ReportMetric(gaveBack.Seconds(), "giveback-s")
	b.ReportMetric(took["shovel"].Seconds()/(approveTook+runTook).Seconds(), "ratio-approve+run/shovel")
	b.ReportMetric(rate(runTook), "dlqbot-msgs/s")
	b.ReportMetric(float64(replayRSS)/1024, "replay-peak-RSS-MB")
	b.ReportMetric(replayHeap, "replay-peak-live-heap-MB")
	for _, c := range contenders[1:] {
		b.ReportMetric(rate(took[c]), c+"-msgs/s")
	}
	took["dlqbot"] = approveTook + runTook // the span of its CPU mark
	// CPU per message moved: this process's own (dlqbot's mover and the
	// target consumers, which every contender has) and the machine's.
	for _, c := range contenders {
		b.ReportMetric(float64(cpu[c].self.Microseconds())/float64(n), c+"-self-cpu-us/msg")
		b.ReportMetric(float64(cpu[c].busy.Microseconds())/float64(n), c+"-machine-cpu-us/msg")
		b.ReportMetric(float64(cpu[c].redis.Microseconds())/float64(n), c+"-redis-cpu-us/msg")
		// How busy it kept the machine: a mover that waits on round trips
		// leaves CPUs idle that the broker could have used.
		b.ReportMetric(100*cpu[c].busy.Seconds()/(took[c].Seconds()*float64(runtime.NumCPU())), c+"-machine-busy-%")
	}
	b.ReportMetric(took["minimal-mover"].Seconds()/runTook.Seconds(), "ratio-dlqbot/minimal")
	b.ReportMetric(took["minimal-mover+replay-headers"].Seconds()/runTook.Seconds(), "ratio-dlqbot/minimal+headers")
	b.ReportMetric(took["shovel"].Seconds()/runTook.Seconds(), "ratio-dlqbot/shovel")
	b.ReportMetric(took["shovel-before"].Seconds()/runTook.Seconds(), "ratio-dlqbot/shovel-before")
	b.ReportMetric(took["shovel-before"].Seconds()/(approveTook+runTook).Seconds(), "ratio-approve+run/shovel-before")
	both := math.Sqrt(took["shovel"].Seconds() * took["shovel-before"].Seconds())
	b.ReportMetric(both/(approveTook+runTook).Seconds(), "ratio-approve+run/shovels-geomean")
}

// benchEnvInt reads a positive integer from the environment (def if unset).
func benchEnvInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

// fanoutDLQs declares a DLQ (with dlqArgs) and a target queue for each
// contender, the DLQs bound to one fanout exchange, and fills them all
// with the same n dead letters (fillFanout), so that every contender moves
// the same messages.
func fanoutDLQs(b *testing.B, r *testkit.Rabbit, contenders []string, dlqArgs amqp.Table, n int) (dlqs, targets map[string]string) {
	b.Helper()
	dlqs, targets = map[string]string{}, map[string]string{}
	fan := testkit.Name("fan")
	ch := r.Channel()
	if err := ch.ExchangeDeclare(fan, "fanout", true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Channel().ExchangeDelete(fan, false, false) })
	for _, c := range contenders {
		dlqs[c], targets[c] = r.Queue(testkit.Name("dlq"), dlqArgs), r.Queue(testkit.Name("tgt"), nil)
		r.DeleteTapAfter(dlqs[c])
		if err := ch.QueueBind(dlqs[c], "", fan, false, nil); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	fillFanout(b, r, fan, testkit.Name("src"), n)
	for _, c := range contenders {
		r.WaitCount(dlqs[c], n, time.Minute+time.Duration(n/500)*time.Second)
	}
	b.Logf("filled %d DLQs with the same %d dead letters in %v", len(contenders), n, time.Since(start).Round(time.Second))
	return dlqs, targets
}

// contenderDLQs declares a DLQ (with dlqArgs) and a target queue for each
// contender; fill(c) fills c's DLQ with n dead letters, the same for every
// contender (fillFanout, one source name), and waits for them. Each DLQ is
// filled right before its contender moves it, so that every contender
// meets a broker holding its n messages alone, as an incident's DLQ is
// met. With together, every DLQ is filled at once (fanoutDLQs) and fill
// does nothing: five DLQs of 1,000,000 put the broker past its paging
// threshold, and each contender then meets the broker in another state.
func contenderDLQs(b *testing.B, r *testkit.Rabbit, contenders []string, dlqArgs amqp.Table, n int, together bool) (dlqs, targets map[string]string, fill func(c string)) {
	b.Helper()
	if together {
		dlqs, targets = fanoutDLQs(b, r, contenders, dlqArgs, n)
		return dlqs, targets, func(string) {}
	}
	dlqs, targets = map[string]string{}, map[string]string{}
	for _, c := range contenders {
		dlqs[c], targets[c] = r.Queue(testkit.Name("dlq"), dlqArgs), r.Queue(testkit.Name("tgt"), nil)
		r.DeleteTapAfter(dlqs[c])
	}
	src := testkit.Name("src")
	return dlqs, targets, func(c string) {
		b.Helper()
		fan := testkit.Name("fan")
		ch := r.Channel()
		// The binding stays, as a DLQ's to its dead-letter exchange does
		// (a preview opens its approval's watch through it).
		if err := ch.ExchangeDeclare(fan, "fanout", true, false, false, false, nil); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = r.Channel().ExchangeDelete(fan, false, false) })
		if err := ch.QueueBind(dlqs[c], "", fan, false, nil); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		fillFanout(b, r, fan, src, n)
		r.WaitCount(dlqs[c], n, time.Minute+time.Duration(n/500)*time.Second)
		b.Logf("filled %s's DLQ with %d dead letters in %v", c, n, time.Since(start).Round(time.Second))
	}
}

// fillFanout publishes n distinct 1 KB dead letters of src ("m-0" …) to the
// fanout exchange, from four channels at once.
func fillFanout(b *testing.B, r *testkit.Rabbit, exchange, src string, n int) {
	const publishers, batch = 4, 10000
	died := time.Now().Add(-time.Hour).Truncate(time.Second)
	var wg sync.WaitGroup
	var failed atomic.Value
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p * batch; i < n; i += publishers * batch {
				msgs := make([]amqp.Publishing, min(batch, n-i))
				for j := range msgs {
					msgs[j] = testkit.Msg("m-"+strconv.Itoa(i+j), testkit.Body(i+j, 1024), testkit.DeathHeaders(src, died))
				}
				if err := testkit.PublishTo(r.Conn, exchange, "", msgs...); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatalf("fill: %v", err)
	}
}

// idSet is a target consumer that acks and records which of the messages
// "m-0" … "m-(n-1)" it got, in a bitmap (the benchmark's own memory stays
// small beside the engine's), counting duplicates and strangers.
type idSet struct {
	mu       sync.Mutex
	seen     []uint64
	n        int
	distinct int
	dups     int
	strange  int
}

func newIDSet(n int) *idSet { return &idSet{seen: make([]uint64, (n+63)/64), n: n} }

func (s *idSet) handle(d amqp.Delivery) string {
	i, err := strconv.Atoi(strings.TrimPrefix(d.MessageId, "m-"))
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err != nil || i < 0 || i >= s.n:
		s.strange++
	case s.seen[i/64]&(1<<(i%64)) != 0:
		s.dups++
	default:
		s.seen[i/64] |= 1 << (i % 64)
		s.distinct++
	}
	return "ack"
}

// wait polls until the consumer has every message, then checks it got each
// once and that the DLQ is empty.
func (s *idSet) wait(b *testing.B, dlq string, r *testkit.Rabbit) {
	b.Helper()
	testkit.Eventually(b, 10*time.Minute, "the target consumer to get every message", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.distinct+s.dups+s.strange >= s.n
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.distinct != s.n || s.dups != 0 || s.strange != 0 {
		b.Fatalf("target got %d distinct of %d, %d duplicates, %d unknown", s.distinct, s.n, s.dups, s.strange)
	}
	if c := r.Count(dlq); c != 0 {
		b.Fatalf("%d message(s) still in %s", c, dlq)
	}
}
