package amqp_test

import (
	"context"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	broker "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// moveWindow is the in-flight window both dlqbot and the reference use.
const moveWindow = 500

func benchN(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// BenchmarkMove compares, in one run, moving N persistent 1 KB messages
// from one queue to another: dlqbot's replay send path (fingerprint,
// header rewrite, ledger intent and confirm in Redis, confirm-then-ack), a
// minimal Go confirm-then-ack mover with the same window (copying messages
// unchanged, and again writing the same three replay headers), the management
// plugin's shovel ("move messages", inside the broker) and a hand-written
// basic.get / publish-and-wait / ack loop. The machine is shared and noisy,
// so the contenders run interleaved over DLQBOT_BENCH_ROUNDS rounds
// (default 3, order rotated each round) and medians are reported, with the
// median of the per-round ratio dlqbot / minimal mover.
func BenchmarkMove(b *testing.B) {
	n := benchN("DLQBOT_BENCH_MOVE_MESSAGES", 10000)
	rounds := benchN("DLQBOT_BENCH_ROUNDS", 3)
	r := testkit.Dial(b)
	// dlqbot's connections are set up once and warmed, as a running bot's
	// are; the minimal mover likewise reuses the test's open connection.
	br, err := broker.New(broker.Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	rdb, prefix := testkit.Redis(b)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Ping(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := st.Ping(context.Background()); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	type contender struct {
		name string
		move func(src, dst string)
	}
	cs := []contender{
		{"dlqbot", func(src, dst string) { dlqbotMove(b, br, st, src, dst) }},
		{"minimal-mover", func(src, dst string) { must(b, testkit.MinimalMove(ctx, r.Conn, src, dst, n, moveWindow, nil)) }},
		{"minimal-mover+replay-headers", func(src, dst string) {
			must(b, testkit.MinimalMove(ctx, r.Conn, src, dst, n, moveWindow, testkit.ReplayHeaders(src)))
		}},
		{"shovel", func(src, dst string) { must(b, testkit.Rabbit3.Shovel(ctx, src, dst)) }},
		{"get-publish-ack-loop", func(src, dst string) { getLoopMove(b, r.Conn, src, dst, n) }},
	}
	rates := map[string][]float64{}
	var ratios, ratiosHdr []float64
	b.ResetTimer()
	for i := 0; i < b.N*rounds; i++ {
		round := map[string]float64{}
		for j := range cs {
			c := cs[(i+j)%len(cs)]
			if c.name == "get-publish-ack-loop" && i >= 3 {
				continue // slow and far behind: a few rounds are enough
			}
			src, dst := r.Queue(testkit.Name("mv-src"), nil), r.Queue(testkit.Name("mv-dst"), nil)
			r.Publish(src, testkit.Msgs(n, 1024)...)
			r.WaitCount(src, n, time.Minute)
			start := time.Now()
			c.move(src, dst)
			took := time.Since(start)
			if got := r.Count(dst); got != n {
				b.Fatalf("%s moved %d of %d", c.name, got, n)
			}
			testkit.DeleteQueue(src)
			testkit.DeleteQueue(dst)
			round[c.name] = float64(n) / took.Seconds()
			rates[c.name] = append(rates[c.name], round[c.name])
		}
		ratios = append(ratios, round["dlqbot"]/round["minimal-mover"])
		ratiosHdr = append(ratiosHdr, round["dlqbot"]/round["minimal-mover+replay-headers"])
	}
	for _, c := range cs {
		b.ReportMetric(median(rates[c.name]), c.name+"-msgs/s")
	}
	b.ReportMetric(median(ratios), "ratio-dlqbot/minimal")
	b.ReportMetric(median(ratiosHdr), "ratio-dlqbot/minimal+headers")
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func dlqbotMove(b *testing.B, br *broker.Broker, st *store.Store, src, dst string) {
	const rid = "r_bench000000000000"
	led := st.Ledger()
	entries := func(batch []engine.Moved, pending bool) []engine.LedgerEntry {
		out := make([]engine.LedgerEntry, len(batch))
		for i, m := range batch {
			out[i] = engine.LedgerEntry{ReplayID: rid, DLQ: src, ID: m.ID, Target: m.Target, Seq: m.Seq, Pending: pending, Copy: m.Copy}
		}
		return out
	}
	// Each window is fenced by the run's lease, as a replay's are.
	_ = st.Leases().Release(context.Background(), rid, "bench")
	epoch, ok, err := st.Leases().Acquire(context.Background(), rid, "bench", time.Minute)
	if err != nil || !ok {
		b.Fatalf("lease: %v %v", ok, err)
	}
	defer func() { _ = st.Leases().Release(context.Background(), rid, "bench") }()
	res, err := br.Move(context.Background(), engine.MoveRequest{
		Queue: src,
		Pick: func(m engine.Message) (engine.Pick, bool) {
			return engine.Pick{ID: engine.ParseMetaDialect(src, m, engine.HeaderDialect{}).ID, Target: dst}, true
		},
		Rewrite: func(h map[string]any, _ engine.Pick) map[string]any {
			return engine.ReplayHeaders(h, "r_bench000000000000", src)
		},
		Window: moveWindow,
		Intend: func(ctx context.Context, batch []engine.Moved) (map[string]string, error) {
			return led.IntendWindow(ctx, engine.Window{ReplayID: rid, DLQ: src, Owner: "bench", Epoch: epoch, Entries: entries(batch, true)})
		},
		Confirmed: func(ctx context.Context, batch []engine.Moved) error { return led.Confirm(ctx, entries(batch, false)) },
	})
	if err != nil || len(res.Failed) > 0 {
		b.Fatalf("move: %v, %d failed", err, len(res.Failed))
	}
}

// getLoopMove is the loop people write by hand: get one, publish it, wait
// for the confirm, ack it.
func getLoopMove(b *testing.B, conn *amqp.Connection, src, dst string, n int) {
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for moved := 0; moved < n; {
		d, ok, err := ch.Get(src, false)
		if err != nil {
			b.Fatal(err)
		}
		if !ok {
			continue
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", dst, true, false, amqp.Publishing{
			Headers: d.Headers, ContentType: d.ContentType, DeliveryMode: d.DeliveryMode, MessageId: d.MessageId, Body: d.Body})
		if err != nil {
			b.Fatal(err)
		}
		if ok, err := dc.WaitContext(ctx); err != nil || !ok {
			b.Fatalf("confirm: %v %v", ok, err)
		}
		if err := d.Ack(false); err != nil {
			b.Fatal(err)
		}
		moved++
	}
}
