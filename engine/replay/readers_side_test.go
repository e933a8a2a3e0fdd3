package replay_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestAPreviewBesideAReplayEndsAndLetsItFinish: a paced replay of 1,000 of
// a DLQ's 2,000 dead letters (rate 200, steps 100 to 400) and, from its
// first delivery until it ends, previews of the same DLQ. The preview does not wait for what the
// replay's read holds: it ends within 30 s and counts those messages as
// held by the replay, naming it. The replay, which may meet its picks held
// by the preview's read, waits for that read at most and never calls it
// another client: it finishes, and the consumer received each id once.
func TestAPreviewBesideAReplayEndsAndLetsItFinish(t *testing.T) {
	t.Parallel()
	everyDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		const n = 1000
		e := newEnvOn(t, fast, on)
		r := e.rabbit
		src, _, dlq := twoSources(t, r, dlqArgs, n)
		p := preview(t, e, engine.Selection{DLQ: dlq, Source: src})
		if p.Selected != n {
			t.Fatalf("selected %d of %s's, want %d", p.Selected, src, n)
		}
		rec := &recorder{}
		r.Consume(src, rec.handle)
		rep, met, held := previewsBeside(t, e, p.Token, dlq, rec)
		id := rep.ID
		if rep.State != engine.StateFinished {
			t.Fatalf("replay %s: %s", rep.State, rep.Note)
		}
		testkit.Eventually(t, 30*time.Second, "every id at the consumer", func() bool { return len(ids(rec.got())) == n })
		for mid, k := range ids(rec.got()) {
			if k != 1 {
				t.Errorf("%s delivered %d times", mid, k)
			}
		}
		if met == 0 || held == 0 {
			t.Errorf("%d preview(s) met messages held by %s, %d of them counted: the test did not test", met, id, held)
		}
		r.WaitCount(dlq, n, 30*time.Second) // the other source's, given back
	})
}

// twoSources makes two source queues that dead-letter through an exchange
// of their own (so replays find returns through a tap and read through a
// cursor) into one DLQ, n messages each in blocks of 50 ("a-<i>" from src,
// "b-<i>" from other): a replay of one source's reads past the other's,
// and its cursor holds those between its steps.
func twoSources(t *testing.T, r *testkit.Rabbit, dlqArgs amqp.Table, n int) (src, other, dlq string) {
	t.Helper()
	const block = 50
	src, other, dlq = testkit.Name("src"), testkit.Name("other"), testkit.Name("dlq")
	ex := r.DLXTopology(src, dlq, dlqArgs)
	r.Queue(other, amqp.Table{"x-dead-letter-exchange": ex, "x-dead-letter-routing-key": dlq})
	for b := 0; b < n/block; b++ {
		var mine, theirs []amqp.Publishing
		for i := b * block; i < (b+1)*block; i++ {
			mine = append(mine, testkit.Msg(fmt.Sprintf("a-%d", i), testkit.Body(i, 100), nil))
			theirs = append(theirs, testkit.Msg(fmt.Sprintf("b-%d", i), testkit.Body(i, 100), nil))
		}
		r.Reject(src, mine...)
		r.Reject(other, theirs...)
	}
	r.WaitCount(dlq, 2*n, 30*time.Second)
	return src, other, dlq
}

// TestAnApprovalBesideAReplayDoesNotWaitForIt: replay A of one source's
// 1,000 messages runs paced, its cursor holding the other source's
// between its steps; the other source's preview, made before, is approved
// meanwhile without a confirm step: its compare does not wait for what
// A's read holds nor calls it gone (A holds as many as it did not find),
// and the approval ends within 10 s. Both replays finish, each id reached
// its consumer once, the DLQ is empty.
func TestAnApprovalBesideAReplayDoesNotWaitForIt(t *testing.T) {
	t.Parallel()
	everyDLQKindOn(t, []testkit.Broker{testkit.Rabbit3}, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		const n = 1000
		e := newEnvOn(t, fast, on)
		r := e.rabbit
		src, other, dlq := twoSources(t, r, dlqArgs, n)
		pa := preview(t, e, engine.Selection{DLQ: dlq, Source: src})
		pb := preview(t, e, engine.Selection{DLQ: dlq, Source: other})
		recA, recB := &recorder{}, &recorder{}
		r.Consume(src, recA.handle)
		r.Consume(other, recB.handle)
		ctx := context.Background()
		apA, err := replay.Approve(e.svc, ctx, pa.Token, "U_A", engine.Params{Step: 100, Cap: 400, Rate: 200, Timeout: 30 * time.Second}, false)
		if err != nil {
			t.Fatal(err)
		}
		doneA := runAsync(t, e, apA.Replay.ID)
		testkit.Eventually(t, 30*time.Second, "A's cursor holding the other source's messages", func() bool {
			h, err := e.store.Claims().Holding(ctx, dlq)
			return err == nil && h[apA.Replay.ID] > 0
		})
		start := time.Now()
		apB, err := replay.Approve(e.svc, ctx, pb.Token, "U_B", engine.Params{Step: 100, Cap: 400, Rate: -1, Timeout: 30 * time.Second}, false)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("B's approval beside A, after %s: %v (changes %+v)", took, err, apB.Changes)
		}
		if took > 10*time.Second {
			t.Errorf("B's approval took %s beside A", took)
		}
		t.Logf("B approved in %s beside A", took)
		repB, err := e.svc.Run(ctx, apB.Replay.ID, "owner-b")
		if err != nil {
			t.Fatal(err)
		}
		var repA engine.Replay
		select {
		case repA = <-doneA:
		case <-time.After(2 * time.Minute):
			t.Fatal("A did not end within 2 minutes")
		}
		for _, rep := range []engine.Replay{repA, repB} {
			if rep.State != engine.StateFinished || rep.Sent != n {
				t.Errorf("%s: %s, %d of %d sent: %s", rep.ID, rep.State, rep.Sent, n, rep.Note)
			}
		}
		for _, rc := range []*recorder{recA, recB} {
			testkit.Eventually(t, 30*time.Second, "every id at its consumer", func() bool { return len(ids(rc.got())) == n })
			for mid, k := range ids(rc.got()) {
				if k != 1 {
					t.Errorf("%s delivered %d times", mid, k)
				}
			}
		}
		r.WaitCount(dlq, 0, 30*time.Second)
	})
}

// previewsBeside approves token (rate 200, steps 100 to 400), runs the
// replay and, from its first copy at the consumer (rec) until it ends,
// previews its DLQ again and again, each within 15 s: it returns the
// replay's end, how many previews met messages held by it, and how many
// messages they counted so. A preview that names another holder fails t.
// (One that could not read messages may name none: on a quorum DLQ the
// give-backs of an earlier read land late, and no replay holds them.)
func previewsBeside(t *testing.T, e *env, token, dlq string, rec *recorder) (rep engine.Replay, met, held int) {
	t.Helper()
	ctx := context.Background()
	ap, err := replay.Approve(e.svc, ctx, token, "U_APP", engine.Params{Step: 100, Cap: 400, Rate: 200, Timeout: 30 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	id := ap.Replay.ID
	done := runAsync(t, e, id)
	testkit.Eventually(t, 30*time.Second, "the replay's first copy at the consumer", func() bool { return len(rec.got()) > 0 })
	// Previews one after the other while the replay runs: each meets
	// the replay at another point (sending a step, settling one).
	previews := 0
	began := time.Now()
	for {
		if time.Since(began) > 90*time.Second {
			t.Fatalf("the replay did not end within 90 s of previews beside it")
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		start := time.Now()
		side, err := e.svc.Preview(pctx, engine.Selection{DLQ: dlq}, "U_SIDE")
		took := time.Since(start)
		cancel()
		if err != nil {
			t.Fatalf("preview %d beside the replay failed after %s: %v", previews+1, took, err)
		}
		previews++
		if took > 30*time.Second { // the promise above; a loaded make test takes up to 20 s
			t.Errorf("preview %d took %s beside the replay", previews, took)
		}
		if h := side.HeldByReplay; h != nil {
			if len(h.Replays) != 1 || h.Replays[0] != id {
				t.Errorf("preview names %v as holders, want %s", h.Replays, id)
			}
			held += h.Messages
			met++
			if pr := side.Problems; len(pr) == 0 || pr[0].Kind != engine.ProblemPartialRead || !strings.Contains(pr[0].Detail, "held by replay "+id) {
				t.Errorf("the preview's first problem does not name %s holding messages: %+v", id, pr)
			}
		}
		select {
		case rep = <-done:
			t.Logf("%d previews in %s beside %s, %d of them met %d message(s) held by it", previews, time.Since(began), id, met, held)
			return rep, met, held
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// holdingScan is the broker with a scan that, once armed, holds its read
// open at its first message until released: a preview whose read lasts.
type holdingScan struct {
	engine.Broker
	armed   atomic.Bool
	holding chan struct{} // closed when the armed scan holds its read
	release chan struct{}
}

func (h *holdingScan) Scan(ctx context.Context, queue string, visit func(engine.Message) error) (engine.ScanInfo, error) {
	if !h.armed.CompareAndSwap(true, false) {
		return h.Broker.Scan(ctx, queue, visit)
	}
	first := true
	return h.Broker.Scan(ctx, queue, func(m engine.Message) error {
		if first {
			first = false
			close(h.holding)
			<-h.release
		}
		return visit(m)
	})
}

// TestAReplayWaitsForAPreviewsReadAsLongAsItLasts: a preview's read holds
// every message of a DLQ for 10 s, longer than the replay's held-wait
// (4 s: the preview's give-back must land within it on a loaded machine)
// and the lease time its reading mark is kept for (4 s). The replay
// approved before and run meanwhile waits for that read as long as it lasts — the
// preview's mark is kept while it reads — and never calls it another
// client: it finishes once the preview ends, every id delivered once.
// (Before, the preview's mark lapsed after the lease time, and the
// replay stopped: "held unacked by another client" of dlqbot's preview.)
func TestAReplayWaitsForAPreviewsReadAsLongAsItLasts(t *testing.T) {
	t.Parallel()
	const n = 50
	cfg := fast
	cfg.Tune.HeldWait, cfg.LeaseTTL = 4*time.Second, 4*time.Second
	hs := &holdingScan{holding: make(chan struct{}), release: make(chan struct{})}
	e := newEnvTuned(t, cfg, testkit.Rabbit3, func(d *replay.Deps) { hs.Broker = d.Broker; d.Broker = hs })
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.DLXTopology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(n, 100)...)
	r.WaitCount(dlq, n, 30*time.Second)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	rec := &recorder{}
	r.Consume(src, rec.handle)
	ctx := context.Background()

	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Step: n, Cap: n, Rate: -1, Timeout: 20 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	hs.armed.Store(true)
	sideDone := make(chan error, 1)
	go func() {
		_, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U_SIDE")
		sideDone <- err
	}()
	select {
	case <-hs.holding:
	case <-time.After(30 * time.Second):
		t.Fatal("the side preview did not start reading")
	}
	started := time.Now()
	done := runAsync(t, e, ap.Replay.ID)
	time.AfterFunc(10*time.Second, func() { close(hs.release) })
	var rep engine.Replay
	select {
	case rep = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("the replay did not end within 90 s")
	}
	t.Logf("the replay ended %s after it started (the preview's read let go after 10 s)", time.Since(started))
	if err := <-sideDone; err != nil {
		t.Errorf("the side preview: %v", err)
	}
	if rep.State != engine.StateFinished || rep.Sent != n {
		t.Fatalf("replay %s, %d of %d sent: %s", rep.State, rep.Sent, n, rep.Note)
	}
	if strings.Contains(rep.Note, "another client") {
		t.Errorf("the replay calls dlqbot's preview another client: %s", rep.Note)
	}
	testkit.Eventually(t, 30*time.Second, "every id at the consumer", func() bool { return len(ids(rec.got())) == n })
	for mid, k := range ids(rec.got()) {
		if k != 1 {
			t.Errorf("%s delivered %d times", mid, k)
		}
	}
	if got := r.Count(dlq); got != 0 {
		t.Errorf("DLQ holds %d after the replay, want 0", got)
	}
}

// TestACheckBesideAReplayEndsAndNamesIt: replay A of one source's
// messages, run by a bot without tap support (so a check of A reads the
// DLQ), stopped after step 1 on the 10 copies its consumer rejected; then
// replay B of the other source's 1,000 runs paced (rate 100, steps 100 to
// 400), its cursor holding A's source's messages between its steps. A
// check of A meanwhile does not wait for what B holds: it ends within
// 10 s, while B still runs, and counts those messages as held by B,
// naming it. B finishes, each id delivered once; a check of A then counts
// exactly the copies of A's the DLQ holds.
func TestACheckBesideAReplayEndsAndNamesIt(t *testing.T) {
	t.Parallel()
	everyDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		const n = 1000
		ctx := context.Background()
		var deps replay.Deps
		e := newEnvTuned(t, fast, on, func(d *replay.Deps) { deps = *d })
		deps.Taps, deps.Returns, deps.TapGaps = testkit.TapOff{}, testkit.TapOff{}, testkit.TapOff{}
		tapless, err := replay.New(fast, deps)
		if err != nil {
			t.Fatal(err)
		}
		r := e.rabbit
		src, other, dlq := twoSources(t, r, dlqArgs, n)

		// A: step 1 of the other source's, every copy rejected.
		r.Consume(other, func(amqp.Delivery) string { return "reject" })
		pa, err := tapless.Preview(ctx, engine.Selection{DLQ: dlq, Source: other}, "U_REQ")
		if err != nil {
			t.Fatal(err)
		}
		apA, err := replay.Approve(tapless, ctx, pa.Token, "U_A", engine.Params{Step: 10, Cap: 10, Rate: -1, Timeout: 30 * time.Second}, false)
		if err != nil {
			t.Fatal(err)
		}
		a := apA.Replay.ID
		repA, err := tapless.Run(ctx, a, "owner-a")
		if err != nil || repA.State != engine.StateStopped || repA.Sent != 10 || repA.ReturnsMode != engine.ReturnsReread {
			t.Fatalf("A: %v, %s (%s), %d sent: %s", err, repA.State, repA.ReturnsMode, repA.Sent, repA.Note)
		}
		r.WaitCount(dlq, 2*n, 30*time.Second) // A's 10 copies back in place of their originals

		// B: the source's 1,000, paced, from this bot (tapped, read
		// through a cursor).
		pb := preview(t, e, engine.Selection{DLQ: dlq, Source: src})
		if pb.Selected != n {
			t.Fatalf("selected %d of %s's, want %d", pb.Selected, src, n)
		}
		rec := &recorder{}
		r.Consume(src, rec.handle)
		apB, err := replay.Approve(e.svc, ctx, pb.Token, "U_B", engine.Params{Step: 100, Cap: 400, Rate: 100, Timeout: 30 * time.Second}, false)
		if err != nil {
			t.Fatal(err)
		}
		b := apB.Replay.ID
		doneB := runAsync(t, e, b)
		testkit.Eventually(t, 30*time.Second, "B's cursor holding messages", func() bool {
			h, err := e.store.Claims().Holding(ctx, dlq)
			return err == nil && h[b] > 0
		})

		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		c, err := e.svc.Check(cctx, a, "")
		cancel()
		took := time.Since(start)
		if err != nil {
			t.Fatalf("check of %s beside %s, after %s: %v", a, b, took, err)
		}
		select {
		case rep := <-doneB:
			t.Fatalf("B ended (%s, %s) before the check of A beside it did, after %s", rep.State, rep.Note, took)
		default:
		}
		if cur, err := e.svc.Status(ctx, b); err != nil || cur.State != engine.StateRunning {
			t.Fatalf("B is %s (%v) when the check of A beside it ends, want running", cur.State, err)
		}
		if took > 10*time.Second {
			t.Errorf("the check of %s took %s beside %s", a, took, b)
		}
		h := c.HeldByReplay
		if h == nil || len(h.Replays) != 1 || h.Replays[0] != b || h.Messages == 0 {
			t.Fatalf("the check beside %s says held by %+v, want %s holding messages", b, h, b)
		}
		if c.Replayed != 10 || c.Returned > 10 {
			t.Errorf("the check beside %s: %d of %d came back, want at most 10 of 10", b, c.Returned, c.Replayed)
		}
		t.Logf("check of %s in %s beside %s: %d of %d came back, %d held by %v", a, took, b, c.Returned, c.Replayed, h.Messages, h.Replays)

		var repB engine.Replay
		select {
		case repB = <-doneB:
		case <-time.After(2 * time.Minute):
			t.Fatal("B did not end within 2 minutes")
		}
		if repB.State != engine.StateFinished || repB.Sent != n {
			t.Fatalf("B: %s, %d of %d sent: %s", repB.State, repB.Sent, n, repB.Note)
		}
		testkit.Eventually(t, 30*time.Second, "every id at the consumer", func() bool { return len(ids(rec.got())) == n })
		for mid, k := range ids(rec.got()) {
			if k != 1 {
				t.Errorf("%s delivered %d times", mid, k)
			}
		}
		r.WaitCount(dlq, n, 30*time.Second) // the other source's, A's copies among them
		copies, _ := dlqHolds(t, e, dlq, a)
		after, err := e.svc.Check(ctx, a, "")
		if err != nil {
			t.Fatal(err)
		}
		if copies != 10 || after.Returned != copies || after.HeldByReplay != nil {
			t.Errorf("after B the DLQ holds %d copies of A's; its check says %d came back, held by %+v: want 10, 10, none", copies, after.Returned, after.HeldByReplay)
		}
	})
}
