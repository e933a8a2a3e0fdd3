package bench_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stroma/dlqbot/internal/testkit"
)

// BenchmarkBinary runs dlqbot's binary as a user does, each run beside its
// reference in the same run, on a classic DLQ of DLQBOT_BENCH_BINARY_MESSAGES
// (default 20,000) persistent 1 KB dead letters fed through the default
// exchange and on one bound to a dead-letter exchange:
//
//   - whole: `dlqbot preview <dlq> --json`, then `dlqbot replay <token>
//     rate=max --json` (approve → finished, the command's wall time) with a
//     healthy auto-ack consumer on the work queue, against the
//     confirm-then-ack mover (testkit.MinimalMove, 500 in flight) and the
//     management shovel (a dynamic shovel, src-delete-after queue-length,
//     ack on confirm). Each contender has its own DLQ, filled right before
//     it runs and read by nobody before it (dlqbot's by its own preview).
//   - filtered: every tenth message dead-lettered from one work queue, the
//     rest from another; `dlqbot preview <dlq> source=<work> --json`, then
//     the replay, against the one-pass filtered mover (reads the DLQ once,
//     moves the selected, gives back the rest) on its own identical DLQ.
//
// Peak RSS is each dlqbot process's VmHWM. Every contender must leave its
// DLQ exactly as it should (empty; the unselected nine tenths) and its
// consumer must receive every copy, or the benchmark fails.
//
// DLQBOT_BENCH_REFERENCES=off runs dlqbot alone (for its peak RSS).
//
//	DLQBOT_BENCH_BINARY_MESSAGES=20000 go test ./bench -run '^$' -bench BenchmarkBinary -benchtime 1x -timeout 60m
func BenchmarkBinary(b *testing.B) {
	n := envInt(b, "DLQBOT_BENCH_BINARY_MESSAGES", 20000)
	testkit.Rabbit3.Require(b)
	bin := dlqbotBinary(b)
	for _, s := range []setup{defaultExchange, boundDLX} {
		b.Run("whole/"+string(s), func(b *testing.B) { benchWhole(b, bin, s, n) })
		b.Run("filtered/"+string(s), func(b *testing.B) { benchFiltered(b, bin, s, n) })
	}
}

func benchWhole(b *testing.B, bin string, s setup, n int) {
	r := testkit.Dial(b)
	_, prefix := testkit.Redis(b)
	env := dlqbotEnv(prefix)
	ctx := context.Background()
	fresh := func() (dlqFixture, string, *autoAck) {
		src := testkit.Name("a.work")
		f := newDLQ(r, s, src)
		f.fill(b, n, func(int) string { return src })
		return f, src, consumeAutoAck(b, r, src)
	}

	// dlqbot: preview, then the replay approved at the terminal.
	f, _, c := fresh()
	p := runDlqbot(b, bin, env, "preview", f.dlq, "--json")
	token, _ := field(p.out, "token").(string)
	if p.exit != 0 || token == "" {
		b.Fatalf("preview exit %d, no token:\n%s\n%s", p.exit, p.raw, tail(p.stderr))
	}
	all := strconv.Itoa(n)
	rp := runDlqbot(b, bin, env, "replay", token, "rate=max", "step="+all, "cap="+all, "--json")
	checkReplay(b, p, rp, n)
	reads(b, p, rp, f.dlq, n)
	c.wait(b, n)
	if left := r.Count(f.dlq); left != 0 {
		b.Fatalf("dlqbot left %d in its DLQ", left)
	}
	b.ReportMetric(p.took.Seconds(), "preview-s")
	b.ReportMetric(float64(p.peakKB)/1000, "preview-peak-RSS-MB")
	b.ReportMetric(rp.took.Seconds(), "replay-s")
	b.ReportMetric(float64(rp.peakKB)/1000, "replay-peak-RSS-MB")
	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	b.ReportMetric(rate(rp.took), "dlqbot-msgs/s")
	if noReferences() {
		return
	}

	// The confirm-then-ack mover.
	f, src, c := fresh()
	start := time.Now()
	if err := testkit.MinimalMove(ctx, r.Conn, f.dlq, src, n, 500, nil); err != nil {
		b.Fatalf("mover: %v", err)
	}
	moverTook := time.Since(start)
	c.wait(b, n)
	if left := r.Count(f.dlq); left != 0 {
		b.Fatalf("the mover left %d in its DLQ", left)
	}

	// The management shovel on a DLQ nobody read.
	f, src, c = fresh()
	start = time.Now()
	if err := testkit.Rabbit3.Shovel(ctx, f.dlq, src); err != nil {
		b.Fatalf("shovel: %v", err)
	}
	shovelTook := time.Since(start)
	c.wait(b, n)

	b.ReportMetric(rate(moverTook), "mover-msgs/s")
	b.ReportMetric(rate(shovelTook), "shovel-msgs/s")
	b.ReportMetric(moverTook.Seconds()/rp.took.Seconds(), "ratio-dlqbot/mover")
	b.ReportMetric(shovelTook.Seconds()/rp.took.Seconds(), "ratio-dlqbot/shovel")
}

func benchFiltered(b *testing.B, bin string, s setup, n int) {
	r := testkit.Dial(b)
	_, prefix := testkit.Redis(b)
	env := dlqbotEnv(prefix)
	ctx := context.Background()
	selected := n / 10
	fresh := func() (dlqFixture, string, *autoAck) {
		work, other := testkit.Name("a.work"), testkit.Name("b.work")
		f := newDLQ(r, s, work, other)
		f.fill(b, n, func(i int) string {
			if i%10 == 9 {
				return work
			}
			return other
		})
		return f, work, consumeAutoAck(b, r, work)
	}

	f, work, c := fresh()
	p := runDlqbot(b, bin, env, "preview", f.dlq, "source="+work, "--json")
	token, _ := field(p.out, "token").(string)
	if p.exit != 0 || token == "" {
		b.Fatalf("preview exit %d, no token:\n%s\n%s", p.exit, p.raw, tail(p.stderr))
	}
	rp := runDlqbot(b, bin, env, "replay", token, "rate=max", "--json")
	checkReplay(b, p, rp, selected)
	reads(b, p, rp, f.dlq, n)
	c.wait(b, selected)
	r.WaitCount(f.dlq, n-selected, time.Minute)
	b.ReportMetric(p.took.Seconds(), "preview-s")
	b.ReportMetric(float64(p.peakKB)/1000, "preview-peak-RSS-MB")
	b.ReportMetric(rp.took.Seconds(), "replay-s")
	b.ReportMetric(float64(rp.peakKB)/1000, "replay-peak-RSS-MB")
	if noReferences() {
		return
	}

	f, work, c = fresh()
	start := time.Now()
	moved, read, err := filteredMove(ctx, r.Conn, f.dlq, work, n, 10000)
	moverTook := time.Since(start)
	if err != nil || moved != selected {
		b.Fatalf("one-pass mover moved %d of %d: %v", moved, selected, err)
	}
	c.wait(b, selected)
	r.WaitCount(f.dlq, n-selected, time.Minute)
	b.ReportMetric(moverTook.Seconds(), "mover-s")
	b.ReportMetric(float64(read), "mover-deliveries")
	b.ReportMetric(rp.took.Seconds()/moverTook.Seconds(), "time-ratio-dlqbot/mover")
	b.ReportMetric((p.took+rp.took).Seconds()/moverTook.Seconds(), "time-ratio-preview+replay/mover")
}

// checkReplay fails the benchmark unless the replay finished having sent
// want, and reports how it looked for returns and in how many steps.
func checkReplay(b *testing.B, p, rp ran, want int) {
	b.Helper()
	if os.Getenv("DLQBOT_BENCH_SHOW") != "" {
		b.Logf("preview: %s\nreplay: %s", p.raw, rp.raw)
	}
	st, _ := field(rp.out, "state").(string)
	sent, _ := field(rp.out, "sent").(float64)
	if rp.exit != 0 || st != "finished" || int(sent) != want {
		b.Fatalf("replay exit %d, state %q, sent %v of %d:\n%s\n%s", rp.exit, st, sent, want, rp.raw, tail(rp.stderr))
	}
	steps, _ := field(rp.out, "step").(float64)
	b.ReportMetric(steps, "steps")
	mode, _ := field(rp.out, "returns_mode").(string)
	b.Logf("returns found by %q in %v step(s)", mode, steps)
	// How returns were found (re-reading the DLQ or not), and how many
	// re-reads the preview planned; reads counts what was read.
	reread := 0.0
	if mode == "reread" {
		reread = 1
	}
	b.ReportMetric(reread, "reread")
	if ret, ok := field(p.out, "returns").(map[string]any); ok {
		reads, _ := ret["reads"].(float64)
		b.ReportMetric(reads, "planned-rereads")
	}
}

// reads reports how many deliveries the preview and the replay received
// from dlq in all, and that per message of the DLQ (1.00: it was read
// once), as the binary counted them (deliveries).
func reads(b *testing.B, p, rp ran, dlq string, n int) {
	b.Helper()
	pd, rd := deliveries(p, dlq), deliveries(rp, dlq)
	if pd < 0 || rd < 0 {
		b.Fatalf("the binary's log does not say its deliveries from %s (preview %d, replay %d):\n%s", dlq, pd, rd, tail(rp.stderr))
	}
	b.ReportMetric(float64(pd), "preview-deliveries")
	b.ReportMetric(float64(rd), "replay-deliveries")
	b.ReportMetric(float64(pd+rd)/float64(n), "reads-per-message")
}

// noReferences reports whether DLQBOT_BENCH_REFERENCES=off asks for
// dlqbot's runs alone (a memory run, where only its RSS matters).
func noReferences() bool { return os.Getenv("DLQBOT_BENCH_REFERENCES") == "off" }

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 10 {
		b.Fatalf("%s=%q: want a number of at least 10", name, v)
	}
	return n
}
