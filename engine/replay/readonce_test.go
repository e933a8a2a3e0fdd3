package replay_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// A filtered replay reads its DLQ once (engine/cursor.go): its steps
// continue one read instead of each reading the DLQ from its head. These
// tests replay every tenth of a DLQ (those that failed in one source) with
// the default steps and decide on the deliveries the broker made from the
// DLQ to dlqbot's reads (redeliveries included), counted as they arrived:
// over the preview and the replay at most twice its size.

// filtered is a DLQ of n dead letters ("m-<i>"), every tenth (i%10 == 9)
// from work, the rest from another source, in a DLX topology (so the run
// finds returns through the tap, not by re-reading the DLQ), with a
// counting consumer on work.
type filtered struct {
	e         *env
	on        testkit.Broker
	dlq, work string
	n         int
	got       *counter
}

func fillFiltered(t testing.TB, on testkit.Broker, dlqArgs amqp.Table, n int) *filtered {
	t.Helper()
	return fillFilteredWith(t, on, dlqArgs, n, fast)
}

// fillFilteredWith is fillFiltered with the engine's settle settings of
// base (a benchmark runs the defaults).
func fillFilteredWith(t testing.TB, on testkit.Broker, dlqArgs amqp.Table, n int, base replay.Config) *filtered {
	t.Helper()
	return fillFilteredVia(t, on, dlqArgs, n, base, false)
}

// fillFilteredVia is fillFilteredWith, with work dead-lettering through
// the default exchange (no tap: returns are found at the cursor's tail)
// when defaultExchange is set.
func fillFilteredVia(t testing.TB, on testkit.Broker, dlqArgs amqp.Table, n int, base replay.Config, defaultExchange bool) *filtered {
	t.Helper()
	cfg := base
	cfg.LeaseTTL = 15 * time.Second
	// The approval's proof at 5,000 too (by default a DLQ this small is compared).
	cfg.Tune.ProofFrom = 1
	cfg.Log = zerolog.New(testLog(t)).Level(zerolog.InfoLevel) // the cursor's opens and releases, why it read the DLQ
	e := newEnvOn(t, cfg, on)
	r := e.rabbit
	work, dlq := testkit.Name("work"), testkit.Name("dlq")
	if defaultExchange {
		r.Topology(work, dlq, dlqArgs)
	} else {
		r.DLXTopology(work, dlq, dlqArgs)
	}
	start := time.Now()
	fillTenth(r, dlq, work, n)
	t.Logf("%s: fill of %d in %v", on.Name, n, time.Since(start).Round(time.Millisecond))
	f := &filtered{e: e, on: on, dlq: dlq, work: work, n: n, got: &counter{}}
	r.Consume(work, f.got.handle)
	return f
}

// testLog is a log writer to t's log that drops what is written after t
// ended (a background part logging late must not fail the test).
func testLog(t testing.TB) io.Writer {
	w := &endedWriter{w: zerolog.NewTestWriter(t)}
	t.Cleanup(func() { w.mu.Lock(); w.ended = true; w.mu.Unlock() })
	return w
}

type endedWriter struct {
	mu    sync.Mutex
	w     io.Writer
	ended bool
}

func (e *endedWriter) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return len(p), nil
	}
	return e.w.Write(p)
}

// fillTenth publishes n dead letters ("m-<i>") into dlq, every tenth
// (i%10 == 9) from work, the rest from another source, and waits until
// dlq holds them.
func fillTenth(r *testkit.Rabbit, dlq, work string, n int) {
	died := time.Now().Add(-time.Hour).Truncate(time.Second)
	other := testkit.Name("other")
	const batch = 10000
	for i := 0; i < n; i += batch {
		msgs := make([]amqp.Publishing, min(batch, n-i))
		for j := range msgs {
			src := other
			if (i+j)%10 == 9 {
				src = work
			}
			msgs[j] = testkit.Msg(fmt.Sprintf("m-%d", i+j), testkit.Body(i+j, 1024), testkit.DeathHeaders(src, died))
		}
		r.Publish(dlq, msgs...)
	}
	r.WaitCount(dlq, n, 3*time.Minute+time.Duration(n/500)*time.Second)
}

// deliveries is how many deliveries the engine's reads have received from
// f's DLQ (amqp.Broker.Delivered): what the broker handed to dlqbot,
// counted as it arrived. (The management API's deliver_get, read before,
// lost a closed channel's last counts: "0 deliveries of 21" in a replay
// that was otherwise exact.)
func (f *filtered) deliveries() int64 { return f.e.broker.Delivered(f.dlq) }

// replayTenth previews and replays the tenth of f's DLQ from work with the
// default steps, unpaced, and checks that the preview and the replay took
// at most twice the DLQ's size in deliveries from it, that work's consumer
// got each selected message once, and that the DLQ holds the rest, in
// order. The approval proves from the broker's counts that nothing
// changed and reads nothing (engine/proof/proof.go): were it to compare
// instead, its read would count in the total and pass the limit.
func (f *filtered) replayTenth(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	selected := f.n / 10
	// The approval's proof needs a management sample of the full DLQ
	// from before the preview (a new queue has none yet: the approval
	// would compare, reading the DLQ once more).
	testkit.Eventually(t, 2*time.Minute, "a management sample of the full DLQ", func() bool {
		cs, err := f.e.broker.Counters(ctx, f.dlq)
		return err == nil && !cs.SampledAt.IsZero() && cs.Ready == f.n && cs.Unacked == 0
	})
	d0 := f.deliveries()
	start := time.Now()
	p, err := f.e.svc.Preview(ctx, engine.Selection{DLQ: f.dlq, Source: f.work}, "U_REQ")
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	if p.Selected != selected || !p.Coverage.Whole() || p.Token == "" {
		t.Fatalf("preview: selected %d, coverage %+v, token %q; want %d of a whole read", p.Selected, p.Coverage, p.Token, selected)
	}
	if p.FirstStepDepth != 10*engine.DefaultStep {
		t.Fatalf("preview: the first step reads %d deep, want %d (its %d copies are every tenth)", p.FirstStepDepth, 10*engine.DefaultStep, engine.DefaultStep)
	}
	t.Logf("%s: preview in %v", f.on.Name, time.Since(start).Round(time.Millisecond))
	d1 := f.deliveries()
	// A person approves once the preview's give-backs are back (a quorum
	// DLQ takes them back late; until then the proof fails safe).
	testkit.Eventually(t, 3*time.Minute, "the preview's give-backs in the DLQ", func() bool { return f.e.rabbit.Count(f.dlq) == f.n })
	// Confirmed: a change the approval reports (none is expected) is
	// logged; the replay must still read the DLQ once and send exactly
	// the preview.
	ap, err := replay.Approve(f.e.svc, ctx, p.Token, "U_APP", engine.Params{Rate: -1}, true)
	if err != nil {
		t.Fatalf("approve: %v: %+v", err, ap.Changes)
	}
	if len(ap.Changes) > 0 {
		t.Logf("%s: the approval saw changes: %+v", f.on.Name, ap.Changes)
	}
	d2 := f.deliveries()
	start = time.Now()
	rep, err := f.e.svc.Run(ctx, ap.Replay.ID, "owner")
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	took := time.Since(start)
	if rep.State != engine.StateFinished || rep.Sent != selected || rep.Missing != 0 || rep.Failed != 0 || rep.InDoubt != 0 {
		t.Fatalf("replay %s: %s, sent %d of %d, missing %d, failed %d, in doubt %d: %s", rep.ID, rep.State, rep.Sent, rep.Total, rep.Missing, rep.Failed, rep.InDoubt, rep.Note)
	}
	d3 := f.deliveries()
	preview, approval, replay := d1-d0, d2-d1, d3-d2
	t.Logf("%s: %d sent in %d steps in %v; deliveries from the DLQ of %d: preview %d, approval %d, replay %d (%.2f× the DLQ)",
		f.on.Name, rep.Sent, rep.Step, took.Round(time.Millisecond), f.n, preview, approval, replay, float64(replay)/float64(f.n))
	if preview < int64(f.n) || replay < int64(selected) {
		t.Fatalf("deliveries from the DLQ: preview %d of a DLQ of %d, replay %d for %d sent: the count missed reads", preview, f.n, replay, selected)
	}
	if preview+approval+replay > 2*int64(f.n) || replay > int64(f.n) {
		t.Fatalf("the preview, the approval and the replay took %d + %d + %d deliveries from a DLQ of %d: want at most %d in all, the replay at most one read", preview, approval, replay, f.n, 2*f.n)
	}
	testkit.Eventually(t, 90*time.Second, "work's consumer to get every copy", func() bool { return f.got.n.Load() >= int64(selected) })
	f.got.mu.Lock()
	distinct, got := len(f.got.ids), f.got.n.Load()
	for id, c := range f.got.ids {
		i, _ := strconv.Atoi(strings.TrimPrefix(id, "m-"))
		if c != 1 || i%10 != 9 {
			f.got.mu.Unlock()
			t.Fatalf("work got %s %d time(s): want each selected message (every tenth) once", id, c)
		}
	}
	f.got.mu.Unlock()
	if distinct != selected || got != int64(selected) {
		t.Fatalf("work got %d deliveries of %d messages, want %d once each", got, distinct, selected)
	}
	rest := f.n - selected
	// A quorum DLQ on 3.10 under load took over a minute to count the
	// 90,000 the cursor gave back at the end.
	testkit.Eventually(t, 3*time.Minute, "the DLQ to hold the rest, no consumer holding any", func() bool {
		ready, consumers := f.e.rabbit.Look(f.dlq)
		return ready == rest && consumers == 0
	})
	ds := f.e.rabbit.Drain(f.dlq, rest, 10*time.Second)
	if len(ds) != rest {
		t.Fatalf("drained %d from the DLQ, want %d", len(ds), rest)
	}
	prev := -1
	for k, d := range ds {
		i, err := strconv.Atoi(strings.TrimPrefix(d.MessageId, "m-"))
		if err != nil || i%10 == 9 || i <= prev {
			t.Fatalf("DLQ message %d is %s after m-%d: want the unselected ones in their order", k, d.MessageId, prev)
		}
		prev = i
	}
}

// TestFilteredReplayReadsTheDLQOnce replays a tenth of a DLQ of 5,000 (its
// 500 from one source) with the default steps, from a classic and a quorum
// DLQ, each on one of RabbitMQ 3.10, 4.0 and 4.3 (all with
// DLQBOT_CLASSIC_ALL=1): at most twice the DLQ's size in
// deliveries over the preview and the replay (with every step reading the
// DLQ from its head to its picks, Config.Tune.CursorHold −1, the replay alone
// took 14,540 on 3.10 classic, 2.9 times the DLQ).
func TestFilteredReplayReadsTheDLQOnce(t *testing.T) {
	t.Parallel()
	classicOn, quorumOn := testkit.ClassicOn(t.Name()), testkit.QuorumOn(t.Name())
	eachKind(t, func(t *testing.T, on testkit.Broker, args amqp.Table) {
		kindOn, by := classicOn, "classic on %s (testkit.ClassicOn)"
		if args != nil {
			kindOn, by = quorumOn, "quorum on %s (testkit.QuorumOn)"
		}
		if !slices.ContainsFunc(kindOn, func(b testkit.Broker) bool { return b.Name == on.Name }) {
			// Each kind on one broker, chosen by the test's name (all with
			// DLQBOT_CLASSIC_ALL=1); TestFilteredReplayReadsTheDLQOnceOf100k
			// reads a quorum DLQ of 4.0 besides.
			t.Skipf(by, kindOn[0].Name)
		}
		n := 5000
		if raceOn {
			n = 2000 // make test's engine lane: the race detector's cost on a 2-core machine
		}
		fillFiltered(t, on, args, n).replayTenth(t)
	})
}

// TestFilteredReplayReadsTheDLQOnceOf100k is the same with a DLQ of
// 100,000 (10,000 selected, 25 steps): before, 2,581,360 deliveries.
//
// make test runs a classic DLQ on 3.10 and a quorum one on 4.0, whose
// default delivery limit counts every give-back (the 5,000 case covers
// each kind on one broker, every broker and kind with
// DLQBOT_CLASSIC_ALL=1); DLQBOT_100K_ALL=1 runs all six. Under load the
// 3.10 classic replay took 1.93× the DLQ until the bypass check waited
// for the cursor's window to refill (checkBypass).
func TestFilteredReplayReadsTheDLQOnceOf100k(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	all := os.Getenv("DLQBOT_100K_ALL") != ""
	eachKind(t, func(t *testing.T, on testkit.Broker, args amqp.Table) {
		quorum := args != nil
		if !all && !(on.Name == testkit.Rabbit4.Name && quorum) {
			// 4.3's classic DLQ of 100,000 is TestWholeDLQReplayOf100k's.
			t.Skip("with DLQBOT_100K_ALL=1 (make test runs 4.0 quorum)")
		}
		fillFiltered(t, on, args, whole).replayTenth(t)
	})
}

// eachKind runs f in parallel subtests for a classic and a quorum DLQ
// (args: its arguments) on each broker.
func eachKind(t *testing.T, f func(t *testing.T, on testkit.Broker, args amqp.Table)) {
	for _, on := range testkit.Brokers() {
		for _, kind := range []string{"classic", "quorum"} {
			t.Run(kind+"-"+on.Name, func(t *testing.T) {
				t.Parallel()
				on.Require(t)
				var args amqp.Table
				if kind == "quorum" {
					args = testkit.Quorum(nil)
				}
				f(t, on, args)
			})
		}
	}
}

// TestStepsReachNewClassesOnceEach replays a DLQ whose classes appear one
// after another: 12 rejected from a, then two Spring failure groups of a
// (three messages), then 6 more rejected. With steps of 5, and the first
// step looking for classes only among the first 12 messages (all a's
// rejected ones), the first two steps send the first ten in DLQ order; the third reaches both Spring
// groups and adds one copy of each, leaving the third Spring message (its
// group's second) to the fourth step, which the cursor kept; each message
// reaches a's consumer once (its deliveries, and nothing left in a once it
// stopped); and the whole replay takes each message from the DLQ once (the
// deliveries the broker made to dlqbot's reads) unless the run says why it
// read the DLQ again. Those are reads, not sends: a loaded machine can
// make a step's bypass check re-read the DLQ (settle_bypass.go), which
// sends nothing, and once counted 83 deliveries of 21 that way.
func TestStepsReachNewClassesOnceEach(t *testing.T) {
	t.Parallel()
	cfg := fast
	cfg.CanaryDepth = 12 // the first step looks no deeper than a's first 12: the later steps reach the others
	logged := &lines{w: testLog(t)}
	cfg.Log = zerolog.New(logged).Level(zerolog.InfoLevel) // why the run read the DLQ again, if it did
	e := newEnv(t, cfg)
	r := e.rabbit
	a, dlq := testkit.Name("a"), testkit.Name("dlq")
	r.DLXTopology(a, dlq, nil)
	var first, last []amqp.Publishing
	for i := range 12 {
		first = append(first, testkit.Msg(fmt.Sprintf("a-%02d", i), []byte("a"), nil))
	}
	for i := 12; i < 18; i++ {
		last = append(last, testkit.Msg(fmt.Sprintf("a-%02d", i), []byte("a"), nil))
	}
	r.Reject(a, first...)
	r.WaitCount(dlq, 12, 20*time.Second)
	var spring []amqp.Publishing
	for _, ex := range []string{"timeout calling payments", "order 17 not found", "order 99 not found"} {
		spring = append(spring, testkit.Msg("s-"+ex, []byte(ex), amqp.Table{"x-original-exchange": "", "x-original-routingKey": a, "x-exception-message": ex}))
	}
	r.Publish(dlq, spring...)
	r.WaitCount(dlq, 15, 20*time.Second)
	r.Reject(a, last...)
	r.WaitCount(dlq, 21, 20*time.Second)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	if p.Selected != 21 || p.FirstStepDepth != 10 {
		t.Fatalf("preview selected %d, first step %d deep: want 21, 10 (DefaultStep)", p.Selected, p.FirstStepDepth)
	}
	got := &counter{}
	consumer := r.Consume(a, got.handle)
	ctx := context.Background()
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Step: 5, Cap: 5, Rate: -1, Timeout: 20 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	d0 := e.broker.Delivered(dlq)
	rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner")
	if err != nil {
		t.Fatal(err)
	}
	if rep.State != engine.StateFinished || rep.Sent != 21 || rep.Step != 4 {
		t.Fatalf("replay: %s after step %d, sent %d: %s; want finished after 4 steps (5, 5, 8, 3) with 21 sent", rep.State, rep.Step, rep.Sent, rep.Note)
	}
	testkit.Eventually(t, 20*time.Second, "every copy at a's consumer", func() bool { return got.n.Load() >= 21 })
	testkit.Eventually(t, 20*time.Second, "nothing ready in a", func() bool { ready, _ := r.Look(a); return ready == 0 })
	consumer.Stop() // what it received is counted: a copy more would be counted, or back in a
	got.mu.Lock()
	distinct, twice := len(got.ids), 0
	for _, k := range got.ids {
		twice += k - 1
	}
	got.mu.Unlock()
	if distinct != 21 || twice != 0 || got.n.Load() != 21 || r.Count(a) != 0 || r.Count(dlq) != 0 {
		t.Fatalf("a's consumer got %d distinct of %d deliveries (%d more than once), a holds %d, the DLQ %d: want 21 once each, none left",
			distinct, got.n.Load(), twice, r.Count(a), r.Count(dlq))
	}
	d := e.broker.Delivered(dlq) - d0
	rereads := logged.with(`"message":"cursor released: `, "its read ended", "the run ended", "the plan is exhausted")
	switch {
	case d < 21:
		t.Fatalf("the replay took %d deliveries from the DLQ of 21: the count missed reads", d)
	case d > 21 && len(rereads) == 0:
		t.Fatalf("the replay took %d deliveries from the DLQ of 21 without saying why it read it again; want each once", d)
	case d > 21:
		t.Logf("the replay took %d deliveries from the DLQ of 21, reading it again: %s", d, strings.Join(rereads, "; "))
	}
}

// lines is a log writer that keeps the lines written through it.
type lines struct {
	w  io.Writer
	mu sync.Mutex
	ls []string
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.ls = append(l.ls, string(p))
	l.mu.Unlock()
	return l.w.Write(p)
}

// with returns the lines that contain s and none of but.
func (l *lines) with(s string, but ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, ln := range l.ls {
		if strings.Contains(ln, s) && !slices.ContainsFunc(but, func(b string) bool { return strings.Contains(ln, b) }) {
			out = append(out, strings.TrimSpace(ln))
		}
	}
	return out
}
