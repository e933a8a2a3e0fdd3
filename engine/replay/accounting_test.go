package replay_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/engine"
	broker "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// newEnvAt is newEnv on broker tb, with the store st (nil: a new one), so
// that two engines can share one Redis like two replicas (each with the
// store's claims and reading marks, as every replica has).
func newEnvAt(t testing.TB, cfg replay.Config, tb testkit.Broker, st *store.Store) *env {
	t.Helper()
	b, err := broker.New(broker.Config{URL: tb.AMQPURL, ManagementURL: tb.ManagementURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if st == nil {
		rdb, prefix := testkit.Redis(t)
		if st, err = store.New(store.Config{Prefix: prefix}, rdb, engine.SystemClock{}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := replay.New(cfg, replay.Deps{Broker: b, Mover: b, Counters: b, Tokens: st.Tokens(), Ledger: st.Ledger(), Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(),
		Jobs: st.Jobs(), Registry: st.Workers(), Claims: st.Claims(), Consumers: testkit.ConsumersOff{}, Watches: testkit.WatchesOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, TapGaps: testkit.TapOff{}})
	if err != nil {
		t.Fatal(err)
	}
	return &env{rabbit: tb.Dial(t), broker: b, store: st, svc: svc}
}

// counter is a target consumer that acks and counts message ids.
type counter struct {
	mu  sync.Mutex
	ids map[string]int
	n   atomic.Int64
}

func (c *counter) handle(d amqp.Delivery) string {
	c.mu.Lock()
	if c.ids == nil {
		c.ids = map[string]int{}
	}
	c.ids[d.MessageId]++
	c.mu.Unlock()
	c.n.Add(1)
	return "ack"
}

// expectExact checks that a replay of the n messages msgs finished exactly:
// finished, sent == total, nothing missing, the DLQ empty and the target
// consumer given each message once.
func expectExact(t *testing.T, r *testkit.Rabbit, rep engine.Replay, n int, dlq string, got *counter) {
	t.Helper()
	if rep.State != engine.StateFinished || rep.Sent != n || rep.Total != n || rep.Missing != 0 || rep.Failed != 0 {
		t.Fatalf("replay %s: state %s, sent %d of %d, missing %d, failed %d: %s; want finished with all %d sent",
			rep.ID, rep.State, rep.Sent, rep.Total, rep.Missing, rep.Failed, rep.Note, n)
	}
	testkit.Eventually(t, 60*time.Second, "the target consumer to get every copy", func() bool { return got.n.Load() >= int64(n) })
	if c := r.Count(dlq); c != 0 {
		t.Fatalf("%d message(s) still in the DLQ after a finished replay", c)
	}
	got.mu.Lock()
	defer got.mu.Unlock()
	if len(got.ids) != n {
		t.Fatalf("target got %d distinct messages, want %d", len(got.ids), n)
	}
}

// TestPreviewsDuringReplayLoseNothing runs previews of the DLQ (another
// engine, another connection: another replica) all through a replay's
// steps. Messages a preview holds while a step reads are waited for, never
// called missing, and a preview never holds them for long: the replay
// finishes with every message at the consumer once and the DLQ empty.
// (TestPicksHeldThroughWholeReadsAreNotMissing holds the picks through
// whole reads on purpose.)
func TestPreviewsDuringReplayLoseNothing(t *testing.T) {
	t.Parallel()
	const n = 300
	cfg := fast
	cfg.Log = zerolog.New(testLog(t)).Level(zerolog.InfoLevel) // what the replay waited for, and why
	e := newEnv(t, cfg)
	other := newEnvAt(t, fast, testkit.Rabbit3, e.store)
	r := e.rabbit
	src, dlq := r.DeadLettered(n, 200)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	got := &counter{}
	r.Consume(src, got.handle)

	ctx, stop := context.WithCancel(context.Background())
	// A preview counts when it read the DLQ, whole or not: while the
	// replay's read (its cursor) holds messages, a preview says what it
	// could not see, or waits for them.
	var scans atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if _, err := other.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U_OTHER"); err == nil || ctx.Err() == nil {
				scans.Add(1)
				if err != nil {
					t.Logf("a preview during the replay: %v", err)
				}
			}
			select { // a person previewing again and again
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	// Paced (about 5 s of sending), so that previews run through its steps.
	rep := approveRun(t, e, p.Token, engine.Params{Step: 20, Cap: 80, Rate: 60, Timeout: 20 * time.Second}, true)
	stop()
	wg.Wait()
	t.Logf("%d previews ran during the replay", scans.Load())
	// One preview at least ran beside the replay (it began before the
	// replay's first step and it waits for what the replay's read holds,
	// so on a loaded machine one can span the whole replay).
	if scans.Load() < 1 {
		t.Fatalf("no preview ran during the replay: the test proves nothing")
	}
	for _, f := range rep.Failures {
		t.Errorf("%s: %s: %s", f.ID, f.Kind, f.Detail)
	}
	expectOnce(t, r, rep, n, dlq, got)
}

// TestCompareOnOneReplicaMoveOnAnother approves on one engine (its compare
// reads the quorum DLQ and gives every message back) and runs the replay
// at once on another engine with its own connection, on both brokers. The
// second must wait for the requeues by the broker's counts, not by what its
// own process remembers.
func TestCompareOnOneReplicaMoveOnAnother(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, tb testkit.Broker) {
		t.Parallel()
		const n = 2000
		a := newEnvAt(t, fast, tb, nil)
		b := newEnvAt(t, fast, tb, a.store)
		r := a.rabbit
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.Topology(src, dlq, testkit.Quorum(nil))
		r.Reject(src, testkit.Msgs(n, 200)...)
		r.WaitCount(dlq, n, 60*time.Second)
		p := preview(t, a, engine.Selection{DLQ: dlq})
		r.WaitCount(dlq, n, 60*time.Second) // the preview's requeues applied
		got := &counter{}
		r.Consume(src, got.handle)

		ctx := context.Background()
		ap, err := replay.Approve(a.svc, ctx, p.Token, "U_APP", oneStep, false)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := b.svc.Run(ctx, ap.Replay.ID, "replica-b")
		if err != nil {
			t.Fatalf("run on the other replica: %v", err)
		}
		expectExact(t, r, rep, n, dlq, got)
	})
}

// TestPreviewSaysFirstThatItReadPart holds some of a DLQ's messages with
// another consumer: the preview says first that it read only part of the
// queue, how much of how many, and its token covers only what it read.
func TestPreviewSaysFirstThatItReadPart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	r := e.rabbit
	_, dlq := r.DeadLettered(50, 100)
	ch := r.Channel()
	if err := ch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	held, err := ch.Consume(dlq, testkit.Name("holder"), false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		<-held
	}
	testkit.Eventually(t, 30*time.Second, "the management API to count the 10 held", func() bool {
		st, err := e.broker.QueueStats(context.Background(), dlq)
		return err == nil && st.Unacked == 10
	})
	p := preview(t, e, engine.Selection{DLQ: dlq})
	if len(p.Problems) == 0 || p.Problems[0].Kind != engine.ProblemPartialRead {
		t.Fatalf("problems %+v, want %s first", p.Problems, engine.ProblemPartialRead)
	}
	if !strings.Contains(p.Problems[0].Detail, "40 of the 50") {
		t.Errorf("partial read says %q, want it to name 40 of the 50", p.Problems[0].Detail)
	}
	if p.Scanned != 40 || p.Selected != 40 || p.Coverage.Whole() {
		t.Fatalf("scanned %d, selected %d, coverage %+v; want 40 read, not whole", p.Scanned, p.Selected, p.Coverage)
	}
	f, err := e.store.Tokens().Load(context.Background(), p.Token)
	if err != nil || f.Total != 40 {
		t.Fatalf("token covers %d (%v), want the 40 read", f.Total, err)
	}
}

// TestMessagesGoneAreMissingAndTheReplayDoesNotFinish consumes some
// previewed messages from the DLQ before the replay: those are missing
// (a whole read with nobody holding any did not find them), the rest are
// sent, and the replay ends stopped, saying how many disappeared.
func TestMessagesGoneAreMissingAndTheReplayDoesNotFinish(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	r := e.rabbit
	src, dlq := r.DeadLettered(30, 100)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	ch := r.Channel()
	for range 5 { // another client consumes 5 previewed messages
		if _, ok, err := ch.Get(dlq, true); !ok || err != nil {
			t.Fatalf("get from the DLQ: %v, %v", ok, err)
		}
	}
	got := &counter{}
	r.Consume(src, got.handle)
	rep := approveRun(t, e, p.Token, oneStep, true)
	t.Logf("failures %+v", rep.Failures)
	if rep.State != engine.StateStopped || rep.Sent != 25 || rep.Missing != 5 {
		t.Fatalf("replay: state %s, sent %d, missing %d: %s; want stopped, 25 sent, 5 missing", rep.State, rep.Sent, rep.Missing, rep.Note)
	}
	if !strings.Contains(rep.Note, "5 MISSING") {
		t.Errorf("note %q does not say loudly that 5 disappeared", rep.Note)
	}
	if c := r.Count(dlq); c != 0 {
		t.Fatalf("%d left in the DLQ", c)
	}
}

// TestHeldElsewhereStaysPlanned: another client holds 5 of the planned
// messages unacked for longer than HeldWait. They are not called missing
// and not dropped: the replay stops saying they are held elsewhere, and a
// resume once the holder let go sends them (before: "finished", 5
// missing, though all 5 were back in the DLQ). HeldWait is an hour of the
// engine's clock, which the test moves on instead of waiting.
func TestHeldElsewhereStaysPlanned(t *testing.T) {
	t.Parallel()
	cfg := fast
	cfg.Tune.HeldWait = time.Hour
	clock := &shiftClock{}
	te := newTapEnv(t, testkit.Rabbit3, cfg, func(d *replay.Deps) { d.Clock = clock })
	e := &te.env
	r := e.rabbit
	src, dlq := r.DeadLettered(20, 100)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	ch, err := r.Conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(5, 0, false); err != nil {
		t.Fatal(err)
	}
	holder := testkit.Name("holder")
	held, err := ch.Consume(dlq, holder, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		<-held
	}
	got := &counter{}
	r.Consume(src, got.handle)
	ctx := context.Background()
	// A step timeout far beyond the advances below: the step ends by
	// settling, not by its timeout.
	params := oneStep
	params.Timeout = 1000 * time.Hour
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", params, true)
	if err != nil {
		t.Fatal(err)
	}
	done := runAsync(t, e, ap.Replay.ID)
	// The step waits up to HeldWait for the holder; the clock moves on an
	// hour at a time until the step has given up on the 5 held.
	// Each change of the replay's record is logged with the time since the
	// approval, so that a run that does not give up says where it stood.
	began, last, advances := time.Now(), "", 0
	testkit.Eventually(t, 8*time.Minute, "the step to give up on the held messages", func() bool { // its approval alone took 26 s to over 2 min beside make test's other lanes, and the whole wait past 4 min once on a 3.10 still compacting after a benchmark of 4,000,000 messages
		cur, err := e.svc.Status(ctx, ap.Replay.ID)
		if err != nil {
			t.Fatal(err)
		}
		if now := fmt.Sprintf("state %s, step %d, sent %d, failures %d: %s", cur.State, cur.Step, cur.Sent, len(cur.Failures), cur.Note); now != last {
			t.Logf("%s after %s (%d clock advances so far)", now, time.Since(began).Round(time.Millisecond), advances)
			last = now
		}
		for _, f := range cur.Failures {
			if f.Kind == "held_elsewhere" {
				return true
			}
		}
		if cur.Sent == 15 {
			clock.Advance(time.Hour)
			advances++
		}
		return false
	})
	rep := <-done
	if rep.State != engine.StateStopped || rep.Sent != 15 || rep.Missing != 0 || !strings.Contains(rep.Note, "held unacked by another client") {
		t.Fatalf("replay: state %s, sent %d, missing %d: %s; want stopped with 15 sent and 5 held elsewhere", rep.State, rep.Sent, rep.Missing, rep.Note)
	}
	_ = ch.Close() // the holder lets go: its 5 go back to the DLQ
	r.WaitCount(dlq, 5, 20*time.Second)
	if _, err := e.svc.Control(ctx, ap.Replay.ID, engine.ControlResume, "U_RESUMER"); err != nil {
		t.Fatal(err)
	}
	rep, err = e.svc.Run(ctx, ap.Replay.ID, "owner2")
	if err != nil {
		t.Fatal(err)
	}
	expectExact(t, r, rep, 20, dlq, got)
}
