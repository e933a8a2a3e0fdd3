package replay_test

import (
	"context"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// received records what a test consumer got: per message id, how many
// copies carrying x-replay-id of the replay watched.
type received struct {
	mu     sync.Mutex
	replay string
	ids    map[string]int
	others int // deliveries without that x-replay-id
}

func newReceived() *received { return &received{ids: map[string]int{}} }

func (rc *received) note(d amqp.Delivery) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rid, _ := d.Headers["x-replay-id"].(string); rid != "" && rid == rc.replay {
		rc.ids[d.MessageId]++
		return
	}
	rc.others++
}

func (rc *received) watch(id string) {
	rc.mu.Lock()
	rc.replay = id
	rc.mu.Unlock()
}

// counts is how many copies arrived in all, how many distinct ids, and
// how many ids arrived more than once.
func (rc *received) counts() (copies, distinct, twice int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, n := range rc.ids {
		copies += n
		distinct++
		if n > 1 {
			twice++
		}
	}
	return copies, distinct, twice
}

// dlqHolds is how many messages dlq holds with x-replay-id id, read
// without changing the queue.
func dlqHolds(t *testing.T, e *env, dlq, id string) (copies, all int) {
	t.Helper()
	_, err := e.broker.Scan(context.Background(), dlq, func(m engine.Message) error {
		all++
		if rid, _ := m.Headers["x-replay-id"].(string); rid == id {
			copies++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return copies, all
}

// stepLines maps each step number to the step lines (passed or stopped
// after it) the notifier saw.
func stepLines(ev *events) map[int]int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	out := map[int]int{}
	for _, e := range ev.es {
		if e.Step != nil && (e.Kind == engine.EventStepPassed || e.Kind == engine.EventStopped) {
			out[e.Step.Step]++
		}
	}
	return out
}

// A pause while step 1 settles (its copies sit in a target nobody
// consumes yet) leaves the step unjudged. The consumer then takes them;
// the resumed run judges step 1 first, posting its line, and finishes
// only with every copy settled. Before, the resumed run sent the rest and
// finished "30 sent, 20 settled" with no line for step 1.
func TestAStepAPauseLeftUnjudgedIsJudgedOnResumeBeforeTheReplayFinishes(t *testing.T) {
	t.Parallel()
	everyDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		ctx := context.Background()
		ev := &events{}
		e := newTapEnv(t, on, fast, func(d *replay.Deps) { d.Notifier = ev })
		r := e.rabbit
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.DLXTopology(src, dlq, dlqArgs)
		r.Reject(src, testkit.Msgs(30, 50)...)
		r.WaitCount(dlq, 30, 20*time.Second)
		pv := preview(t, &e.env, engine.Selection{DLQ: dlq})
		ap, err := replay.Approve(e.svc, ctx, pv.Token, "U_APP", engine.Params{Rate: -1, Timeout: 30 * time.Second}, false)
		if err != nil {
			t.Fatal(err)
		}
		id := ap.Replay.ID
		done := runAsync(t, &e.env, id)
		testkit.Eventually(t, 20*time.Second, "step 1 sent", func() bool {
			cur, _ := e.svc.Status(ctx, id)
			return cur.Sent == 10 && r.Count(src) == 10
		})
		if _, err := e.svc.Control(ctx, id, engine.ControlPause, "U_PAUSER"); err != nil {
			t.Fatal(err)
		}
		if rep := <-done; rep.State != engine.StatePaused {
			t.Fatalf("after the pause: %s (%q), want paused", rep.State, rep.Note)
		}
		got := newReceived()
		got.watch(id)
		r.Consume(src, func(d amqp.Delivery) string { got.note(d); return "ack" })
		testkit.Eventually(t, 20*time.Second, "step 1's copies consumed", func() bool {
			n, _, _ := got.counts()
			return n == 10
		})
		if _, err := e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER"); err != nil {
			t.Fatal(err)
		}
		rep, err := e.svc.Run(ctx, id, "owner-2")
		if err != nil {
			t.Fatal(err)
		}
		if rep.State != engine.StateFinished || rep.Sent != 30 || rep.Settled != rep.Sent {
			t.Fatalf("resumed: %s, %d sent, %d settled (%q): want finished with all 30 settled", rep.State, rep.Sent, rep.Settled, rep.Note)
		}
		lines := stepLines(ev)
		for k := 1; k <= rep.Step; k++ {
			if lines[k] != 1 {
				t.Fatalf("step %d has %d line(s) (%v), want one for each of steps 1–%d", k, lines[k], lines, rep.Step)
			}
		}
		testkit.Eventually(t, 20*time.Second, "every copy consumed", func() bool {
			n, _, _ := got.counts()
			return n >= 30
		})
		copies, distinct, twice := got.counts()
		if copies != 30 || distinct != 30 || twice != 0 {
			t.Fatalf("the consumer got %d copies of %d ids (%d twice), want each of 30 once", copies, distinct, twice)
		}
		if _, all := dlqHolds(t, &e.env, dlq, id); all != 0 {
			t.Fatalf("the DLQ holds %d messages after a finished replay", all)
		}
	})
}

// A cancel while step 1's copies are being rejected, one every 100 ms by
// a consumer of the target: the copies already sent are still watched
// for the step's grace, so the cancelled record counts as many back as a
// check does, and as the DLQ holds copies of the replay. Before, the
// record kept what had come back by the cancel.
func TestCopiesSentBeforeACancelAreStillCountedWhenTheyComeBack(t *testing.T) {
	t.Parallel()
	everyDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		ctx := context.Background()
		e := newTapEnv(t, on, graceful, nil)
		r := e.rabbit
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.DLXTopology(src, dlq, dlqArgs)
		r.Reject(src, testkit.Msgs(30, 50)...)
		r.WaitCount(dlq, 30, 20*time.Second)
		pv := preview(t, &e.env, engine.Selection{DLQ: dlq})
		got := newReceived()
		var rejected sync.WaitGroup
		rejected.Add(10)
		r.Consume(src, func(d amqp.Delivery) string {
			got.note(d)
			time.Sleep(100 * time.Millisecond) // a slow consumer: the copies come back over a second
			rejected.Done()
			return "reject"
		})
		ap, err := replay.Approve(e.svc, ctx, pv.Token, "U_APP", engine.Params{Rate: -1, Timeout: 30 * time.Second}, false)
		if err != nil {
			t.Fatal(err)
		}
		id := ap.Replay.ID
		got.watch(id)
		done := runAsync(t, &e.env, id)
		testkit.Eventually(t, 20*time.Second, "step 1 sent", func() bool {
			cur, _ := e.svc.Status(ctx, id)
			return cur.Sent == 10
		})
		if _, err := e.svc.Control(ctx, id, engine.ControlCancel, "U_CANCELLER"); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 5*time.Second, "the record says cancelled", func() bool {
			cur, _ := e.svc.Status(ctx, id)
			return cur.State == engine.StateCancelled
		})
		rep := <-done
		rejected.Wait()
		if n, _, _ := got.counts(); n != 10 {
			t.Fatalf("the consumer got %d copies, want step 1's 10", n)
		}
		r.WaitCount(dlq, 30, 20*time.Second) // 20 never sent, 10 back
		inDLQ, _ := dlqHolds(t, &e.env, dlq, id)
		c, err := e.svc.Check(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		cur, err := e.svc.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if rep.State != engine.StateCancelled || cur.State != engine.StateCancelled {
			t.Fatalf("%s / %s, want cancelled", rep.State, cur.State)
		}
		if inDLQ != 10 || c.Returned != inDLQ || cur.Returned != inDLQ || rep.Returned != inDLQ {
			t.Fatalf("the DLQ holds %d copies of the replay, check says %d came back, the record %d (the run returned %d): want all 10 everywhere", inDLQ, c.Returned, cur.Returned, rep.Returned)
		}
	})
}

// A step a pause left unjudged whose copies came back while the replay was
// paused stops the resumed replay on them, before it sends anything more,
// with the step's own line. Before, the resumed run sent step 2.
func TestAStepAPauseLeftUnjudgedThatCameBackStopsTheResumedReplay(t *testing.T) {
	t.Parallel()
	everyDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		ctx := context.Background()
		ev := &events{}
		e := newTapEnv(t, on, graceful, func(d *replay.Deps) { d.Notifier = ev })
		r := e.rabbit
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.DLXTopology(src, dlq, dlqArgs)
		r.Reject(src, testkit.Msgs(30, 50)...)
		r.WaitCount(dlq, 30, 20*time.Second)
		pv := preview(t, &e.env, engine.Selection{DLQ: dlq})
		ap, err := replay.Approve(e.svc, ctx, pv.Token, "U_APP", engine.Params{Rate: -1, Timeout: 30 * time.Second}, false)
		if err != nil {
			t.Fatal(err)
		}
		id := ap.Replay.ID
		done := runAsync(t, &e.env, id)
		testkit.Eventually(t, 20*time.Second, "step 1 sent", func() bool {
			cur, _ := e.svc.Status(ctx, id)
			return cur.Sent == 10 && r.Count(src) == 10
		})
		if _, err := e.svc.Control(ctx, id, engine.ControlPause, "U_PAUSER"); err != nil {
			t.Fatal(err)
		}
		if rep := <-done; rep.State != engine.StatePaused {
			t.Fatalf("after the pause: %s (%q), want paused", rep.State, rep.Note)
		}
		got := newReceived()
		got.watch(id)
		r.Consume(src, func(d amqp.Delivery) string { got.note(d); return "reject" })
		testkit.Eventually(t, 20*time.Second, "step 1's copies back in the DLQ", func() bool {
			n, _, _ := got.counts()
			copies, _ := dlqHolds(t, &e.env, dlq, id)
			return n == 10 && copies == 10
		})
		if _, err := e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER"); err != nil {
			t.Fatal(err)
		}
		rep, err := e.svc.Run(ctx, id, "owner-2")
		if err != nil {
			t.Fatal(err)
		}
		if rep.State != engine.StateStopped || rep.Sent != 10 || rep.Returned != 10 || rep.Step != 1 {
			t.Fatalf("resumed: %s after step %d, %d sent, %d back (%q): want stopped on step 1's 10 returns, nothing more sent", rep.State, rep.Step, rep.Sent, rep.Returned, rep.Note)
		}
		if lines := stepLines(ev); lines[1] != 1 || len(lines) != 1 {
			t.Fatalf("step lines %v, want one, for step 1", lines)
		}
		if n, _, _ := got.counts(); n != 10 {
			t.Fatalf("the consumer got %d copies, want step 1's 10 only", n)
		}
	})
}
