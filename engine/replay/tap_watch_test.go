package replay_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	dlqamqp "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// inDLQ drains dlq (all n messages) and returns, per message id, the
// copies that carry replay's id and a new death (the broker's x-death),
// and how many messages it held in all.
func returnedInDLQ(t *testing.T, r *testkit.Rabbit, dlq, replay string, n int) (map[string]int, int) {
	t.Helper()
	left := r.Drain(dlq, n, 5*time.Second)
	out := map[string]int{}
	for _, d := range left {
		if id, _ := d.Headers["x-replay-id"].(string); id == replay && d.Headers["x-death"] != nil {
			out[d.MessageId]++
		}
	}
	return out, len(left)
}

func TestTapDeletedMidReplayIsDeclaredAgainAndItsWindowReconciled(t *testing.T) {
	t.Parallel()
	everyDLQKind(t, tapDeletedMidReplay)
}

func tapDeletedMidReplay(t *testing.T, b testkit.Broker, dlqArgs amqp.Table) {
	ctx := context.Background()
	gt := &gatedTaps{}
	e := newTapEnv(t, b, graceful, func(d *replay.Deps) { gt.Taps = d.Taps; d.Taps = gt })
	t.Cleanup(gt.open)
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.DLXTopology(src, dlq, dlqArgs)
	tap := dlqamqp.TapName(dlq)
	t.Cleanup(func() { r.DeleteQueue(tap) })
	const n, bad = 400, 8
	r.Reject(src, testkit.Msgs(n, 100)...)
	r.WaitCount(dlq, n, 30*time.Second)
	p := preview(t, &e.env, engine.Selection{DLQ: dlq})
	if p.Selected != n || p.Returns.Mode != engine.ReturnsTap {
		t.Fatalf("preview selected %d, returns %+v: want %d through a tap", p.Selected, p.Returns, n)
	}

	// The consumer: copies 31 to 38 it receives (in step 3: steps of 10,
	// 20, 40) are rejected, and just before the first of them it deletes
	// the tap through the management API, as an operator cleaning up
	// would: those dead letters reach the DLQ while no tap exists. The
	// replay notices the loss at once and declares the tap again; that
	// declaration waits (gatedTaps) until the 8 are in the DLQ, so the
	// window without a tap holds them however fast the replay is.
	var mu sync.Mutex
	got, rejected := map[string]int{}, map[string]bool{}
	var deleted time.Time
	var delErr error
	r.Consume(src, func(d amqp.Delivery) string {
		mu.Lock()
		defer mu.Unlock()
		got[d.MessageId]++
		k := 0
		for _, c := range got {
			k += c
		}
		if k == 31 {
			gt.close()
			delErr = b.DeleteQueueHTTP(tap)
			deleted = time.Now()
		}
		if k > 30 && k <= 30+bad {
			rejected[d.MessageId] = true
			return "reject"
		}
		return "ack"
	})
	prm := engine.Params{Step: 10, Cap: 500, Rate: 200, Timeout: 30 * time.Second}
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", prm, false)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		rep engine.Replay
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner-"+t.Name())
		done <- result{rep, err}
	}()
	testkit.Eventually(t, 2*time.Minute, "the consumer to reject its 8 copies", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(rejected) == bad
	})
	mu.Lock()
	if delErr != nil || deleted.IsZero() {
		mu.Unlock()
		t.Fatalf("the tap was not deleted mid-replay: %v", delErr)
	}
	mu.Unlock()
	r.WaitCount(dlq, n-70+bad, 30*time.Second) // the 8 dead letters landed with no tap
	gt.open()
	res := <-done
	rep, err := res.rep, res.err
	if err != nil {
		t.Fatalf("run: %v (the tap's loss must not stop the replay with an error)", err)
	}
	// It stops for the returns (a canary does), never for the tap.
	if strings.Contains(rep.Note, "not found") || strings.Contains(rep.Note, "drain tap") {
		t.Fatalf("replay stopped on the tap's loss: %s", rep.Note)
	}
	if rep.State != engine.StateStopped || rep.Step != 3 || rep.Sent != 70 {
		t.Fatalf("replay %s at step %d, %d sent (%s): want stopped after step 3 with 70 sent", rep.State, rep.Step, rep.Sent, rep.Note)
	}
	seen := rep.Returned
	if rep.Unseen != nil {
		seen += rep.Unseen.Count
	}
	if rep.Returned > bad || seen < bad || (rep.Returned < bad && rep.Unseen == nil) {
		t.Fatalf("replay: %d returned, unseen %+v: want %d, or an unseen count covering the rest", rep.Returned, rep.Unseen, bad)
	}
	if rep.Unseen == nil && !strings.Contains(rep.Note, "8 came back") {
		t.Fatalf("note %q: want the 8 that came back", rep.Note)
	}
	rec, err := e.store.Returns().Returned(ctx, rep.ID, -1)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Total >= bad {
		t.Fatalf("the tap recorded all %d returns: the test did not exercise a window without it", rec.Total)
	}
	t.Logf("stopped after step 3: %d returned (%d seen by the tap, the rest by the re-read), unseen %+v: %s", rep.Returned, rec.Total, rep.Unseen, rep.Note)
	// The tap is back, bound like the DLQ, and the window is on record.
	r.WaitCount(tap, 0, 10*time.Second)
	gaps, err := e.store.TapGaps().TapGaps(ctx, dlq)
	if err != nil || len(gaps) == 0 || gaps[len(gaps)-1].Open() || gaps[0].From.After(deleted) {
		t.Fatalf("tap gaps %v (%v): want one closed window starting before the deletion at %s", gaps, err, deleted.Format(time.RFC3339Nano))
	}
	// Decided by the broker: the DLQ holds the 8 rejected copies with the
	// replay's id (and the 330 not sent yet).
	r.WaitCount(dlq, n-70+bad, 30*time.Second)

	c, err := e.svc.Check(ctx, rep.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Unseen == nil && c.Returned != bad {
		t.Fatalf("check: %d returned, nothing unseen: want exactly %d", c.Returned, bad)
	}
	if c.Unseen != nil && (c.Returned+c.Unseen.Count < bad || c.Unseen.From.IsZero()) {
		t.Fatalf("check: %d returned, unseen %+v: want the window named and covering %d", c.Returned, c.Unseen, bad)
	}

	t.Logf("check: %d returned, unseen %+v; tap gone from %s to %s", c.Returned, c.Unseen, gaps[0].From.Format(time.StampMilli), gaps[len(gaps)-1].To.Format(time.StampMilli))
	// Resumed, it finishes, and still says the 8 came back.
	if _, err := e.svc.Control(ctx, rep.ID, engine.ControlResume, "U_RES"); err != nil {
		t.Fatal(err)
	}
	rep, err = e.svc.Run(ctx, rep.ID, "owner2-"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	if rep.State != engine.StateFinished || rep.Sent != n {
		t.Fatalf("resumed replay %s, %d sent (%s): want finished, %d", rep.State, rep.Sent, rep.Note, n)
	}
	if rep.Unseen == nil && (rep.Returned != bad || !strings.Contains(rep.Note, "8 came back")) {
		t.Fatalf("finished with %d returned (%s): want %d", rep.Returned, rep.Note, bad)
	}
	if rep.Unseen != nil && (rep.Returned+rep.Unseen.Count < bad || strings.Contains(rep.Note, "0 came back")) {
		t.Fatalf("finished with %d returned, unseen %+v (%s)", rep.Returned, rep.Unseen, rep.Note)
	}
	// The consumer got every message; the DLQ holds exactly the rejected
	// copies, each with this replay's id and a new death.
	testkit.Eventually(t, 30*time.Second, "the consumer to receive all 400", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == n
	})
	back, total := returnedInDLQ(t, r, dlq, rep.ID, bad)
	if total != bad || len(back) != bad {
		t.Fatalf("the DLQ holds %d message(s), %d returned copies of the replay: want exactly the %d rejected", total, len(back), bad)
	}
	mu.Lock()
	for id := range back {
		if !rejected[id] {
			t.Errorf("%s is back in the DLQ but the consumer did not reject it", id)
		}
	}
	mu.Unlock()
}

// gatedTaps holds EnsureTap between close and open: the test decides when
// a tap deleted mid-replay may be declared again.
type gatedTaps struct {
	engine.Taps
	mu   sync.Mutex
	gate chan struct{}
}

func (g *gatedTaps) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate == nil {
		g.gate = make(chan struct{})
	}
}

func (g *gatedTaps) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
}

func (g *gatedTaps) EnsureTap(ctx context.Context, dlq string) (engine.TapState, error) {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return engine.TapState{}, ctx.Err()
		}
	}
	return g.Taps.EnsureTap(ctx, dlq)
}

func TestCheckAfterATapLossCountsExactlyOrNamesTheWindowItCouldNotSee(t *testing.T) {
	t.Parallel()
	everyDLQKind(t, checkAfterTapLoss)
}

func checkAfterTapLoss(t *testing.T, b testkit.Broker, dlqArgs amqp.Table) {
	ctx := context.Background()
	bb := &budgeted{}
	e := newTapEnv(t, b, fast, func(d *replay.Deps) { bb.Broker = d.Broker; d.Broker = bb })
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.DLXTopology(src, dlq, dlqArgs)
	tap := dlqamqp.TapName(dlq)
	t.Cleanup(func() { r.DeleteQueue(tap) })
	const n = 20
	r.Reject(src, testkit.Msgs(n, 50)...)
	r.WaitCount(dlq, n, 30*time.Second)
	p := preview(t, &e.env, engine.Selection{DLQ: dlq})
	// Nobody consumes the copies yet: the step sends all 20 and sees none
	// leave the target (it stops, and nothing came back so far).
	rep := approveRun(t, &e.env, p.Token, engine.Params{Step: n, Cap: n, Rate: -1, Timeout: 2 * time.Second}, false)
	if rep.Sent != n || rep.Returned != 0 || rep.Unseen != nil {
		t.Fatalf("replay %s: %d sent, %d returned, unseen %+v: want %d sent, none back yet", rep.State, rep.Sent, rep.Returned, rep.Unseen, n)
	}
	r.WaitCount(src, n, 30*time.Second)
	// The tap is deleted after the replay, and then every copy fails:
	// the dead letters reach the DLQ, none reaches a tap.
	if err := b.DeleteQueueHTTP(tap); err != nil {
		t.Fatal(err)
	}
	c := r.Consume(src, func(amqp.Delivery) string { return "reject" })
	r.WaitCount(dlq, n, 30*time.Second)
	c.Stop()

	// A follow-up that may not re-read the DLQ (the read budget refuses)
	// cannot tell, and says so: never "0 came back".
	bb.refuse.Store(true)
	fu, err := e.svc.Check(ctx, rep.ID, "+5m")
	if err != nil {
		t.Fatal(err)
	}
	if fu.Unseen == nil || fu.Unseen.Count != n || fu.Returned != 0 || fu.Unseen.From.IsZero() || fu.Unseen.From.Before(rep.CreatedAt.Truncate(time.Second)) {
		t.Fatalf("follow-up: %d returned, unseen %+v: want the %d copies named as unseen, with the window", fu.Returned, fu.Unseen, n)
	}
	if w := fu.Unseen.Words(); !strings.Contains(w, "could not tell for 20 copies (the tap was gone from ") {
		t.Fatalf("unseen words %q", w)
	}
	// The check declared the tap again (later follow-ups count from it).
	r.WaitCount(tap, 0, 10*time.Second)

	// With the read allowed, the check counts them exactly, against the
	// DLQ's own contents.
	bb.refuse.Store(false)
	ck, err := e.svc.Check(ctx, rep.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if ck.Unseen != nil || ck.Returned != n || len(ck.Groups) != 1 || ck.Groups[0].Count != n {
		t.Fatalf("check: %d returned, groups %+v, unseen %+v: want exactly %d, nothing unseen", ck.Returned, ck.Groups, ck.Unseen, n)
	}
	back, total := returnedInDLQ(t, r, dlq, rep.ID, n)
	if total != n || len(back) != n {
		t.Fatalf("the DLQ holds %d, %d of them returned copies of the replay: want %d", total, len(back), n)
	}
}

func TestAReplayThatCannotRereadAfterATapLossSaysForHowManyItCouldNotTell(t *testing.T) {
	t.Parallel()
	// A classic DLQ and the tap: one broker (testkit.ClassicOn), all three
	// with DLQBOT_CLASSIC_ALL=1.
	testkit.EachBrokerIn(t, testkit.ClassicOn(t.Name()), func(t *testing.T, b testkit.Broker) {
		t.Parallel()
		// The window without the tap is as long as the engine takes to
		// declare it again: on a loaded machine that can come before the
		// first copy is rejected, and the case is tried again afresh.
		for try := 1; ; try++ {
			if tapLossCannotReread(t, b) {
				return
			}
			if try == 3 {
				t.Fatal("the tap recorded every return in 3 tries: the test did not exercise a window without it")
			}
			t.Logf("try %d: the tap was back before any copy was rejected; again", try)
		}
	})
}

// tapLossCannotReread is the case of
// TestAReplayThatCannotRereadAfterATapLossSaysForHowManyItCouldNotTell on
// b; it returns false, having checked nothing, when the tap recorded every
// return (no window without it).
func tapLossCannotReread(t *testing.T, b testkit.Broker) bool {
	ctx := context.Background()
	bb := &budgeted{}
	e := newTapEnv(t, b, graceful, func(d *replay.Deps) { bb.Broker = d.Broker; d.Broker = bb })
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.DLXTopology(src, dlq, nil)
	tap := dlqamqp.TapName(dlq)
	t.Cleanup(func() { r.DeleteQueue(tap) })
	const n, bad = 70, 8
	r.Reject(src, testkit.Msgs(n, 50)...)
	r.WaitCount(dlq, n, 30*time.Second)
	p := preview(t, &e.env, engine.Selection{DLQ: dlq})
	var mu sync.Mutex
	k := 0
	r.Consume(src, func(d amqp.Delivery) string {
		mu.Lock()
		defer mu.Unlock()
		k++
		if k == 11 {
			if err := b.DeleteQueueHTTP(tap); err != nil {
				t.Errorf("delete tap: %v", err)
			}
		}
		if k > 10 && k <= 10+bad {
			return "reject"
		}
		return "ack"
	})
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Step: 10, Cap: 500, Rate: 200, Timeout: 30 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	bb.refuse.Store(true) // no re-read of the DLQ from now on
	rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner")
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	rec, err := e.store.Returns().Returned(ctx, rep.ID, -1)
	if err != nil {
		t.Fatal(err)
	}
	missed := bad - rec.Total // dead-lettered while no tap existed
	if missed == 0 {
		return false
	}
	t.Logf("replay %s: %d returned (tap saw %d), unseen %+v: %s", rep.State, rep.Returned, rec.Total, rep.Unseen, rep.Note)
	if rep.Unseen == nil || rep.Unseen.Count < missed || rep.Returned != rec.Total {
		t.Fatalf("replay %s: %d returned, unseen %+v (%s): want %d seen by the tap and at least %d named unseen", rep.State, rep.Returned, rep.Unseen, rep.Note, rec.Total, missed)
	}
	if strings.Contains(rep.Note, "0 came back") || strings.Contains(rep.Note, "none seen back") {
		t.Fatalf("note %q claims none came back", rep.Note)
	}
	if rep.Returned == 0 && (!strings.Contains(rep.Note, "could not tell for") || rep.State != engine.StateFinished) {
		t.Fatalf("replay %s: %q: want it finished (nothing seen back), saying what it could not tell", rep.State, rep.Note)
	}
	// Decided by the broker: the 8 rejected copies are in the DLQ, with
	// those not sent (a return the tap saw stops the canary).
	r.WaitCount(dlq, n-rep.Sent+bad, 30*time.Second)
	c, err := e.svc.Check(ctx, rep.ID, "+5m")
	if err != nil {
		t.Fatal(err)
	}
	if c.Unseen == nil || c.Returned+c.Unseen.Count < bad {
		t.Fatalf("follow-up: %d returned, unseen %+v: want the window named", c.Returned, c.Unseen)
	}
	return true
}
