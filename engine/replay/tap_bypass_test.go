package replay_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// Past the canary phase the tap-bypass check is made every
// Config.Tune.BypassEvery, not at every step (settle_bypass.go): a consumer
// that starts publishing its failures straight to the DLQ, past the tap,
// only once the steps have reached the cap must still stop the replay
// before it has sent everything, and the bot's counts must be the DLQ's.
func TestABypassBegunPastTheCanaryPhaseStopsTheReplay(t *testing.T) {
	t.Parallel()
	// A classic DLQ and the tap: one broker (testkit.ClassicOn), all three
	// with DLQBOT_CLASSIC_ALL=1.
	testkit.EachBrokerIn(t, testkit.ClassicOn(t.Name()), func(t *testing.T, b testkit.Broker) {
		t.Parallel()
		cfg := fast
		cfg.Tune.BypassEvery = time.Second
		e := newTapEnv(t, b, cfg, nil)
		r := e.rabbit
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.DLXTopology(src, dlq, nil)
		// Steps of 10, 20, then 40 (the cap): the 200th message is in
		// step 7, the fourth step past the canary phase; 800 more follow
		// in 20 steps, many times BypassEvery even on a fast machine.
		const n, from = 1000, 200
		r.Reject(src, testkit.Msgs(n, 100)...)
		r.WaitCount(dlq, n, 30*time.Second)
		p := preview(t, &e.env, engine.Selection{DLQ: dlq})
		if p.Returns.Mode != engine.ReturnsTap {
			t.Fatalf("preview returns %+v, want the tap", p.Returns)
		}
		var got, past atomic.Int64
		pub := r.Channel()
		r.Consume(src, func(d amqp.Delivery) string {
			defer got.Add(1)
			i, _ := strconv.Atoi(strings.TrimPrefix(d.MessageId, "m-"))
			if i < from {
				return "ack"
			}
			if err := publishPastTap(pub, dlq, d, "order "+d.MessageId+" not found", nil); err == nil {
				past.Add(1)
			}
			return "ack"
		})
		rep := approveRun(t, &e.env, p.Token, engine.Params{Step: 10, Cap: 40, Rate: -1, Timeout: 20 * time.Second}, false)
		if rep.State != engine.StateStopped || rep.ReturnsMode != engine.ReturnsReread || !strings.Contains(rep.Note, "without passing its bindings") {
			t.Fatalf("replay %s mode %q note %q: want stopped, switched to re-reads, saying why", rep.State, rep.ReturnsMode, rep.Note)
		}
		if rep.Sent <= from || rep.Sent >= n {
			t.Fatalf("sent %d of %d: want stopped past the %d sent before the bypass began, before the end", rep.Sent, n, from)
		}
		if rep.Returned == 0 {
			t.Fatal("stopped with none counted back")
		}
		// What the broker holds: the messages not sent, and every copy
		// the consumer published past the tap.
		testkit.Eventually(t, 30*time.Second, "the consumer to take every copy sent", func() bool { return got.Load() == int64(rep.Sent) })
		back := int(past.Load())
		if back != rep.Sent-from {
			t.Fatalf("the consumer published %d past the tap, want %d", back, rep.Sent-from)
		}
		r.WaitCount(dlq, n-rep.Sent+back, 30*time.Second)
		if rep.Returned > back {
			t.Fatalf("the bot counted %d back, the DLQ received %d", rep.Returned, back)
		}
		c, err := e.svc.Check(t.Context(), rep.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if c.Returned != back {
			t.Fatalf("check: %d back, the DLQ holds %d", c.Returned, back)
		}
	})
}

// Another reader of the DLQ that gives messages back while the run's last
// step settles makes the DLQ grow by more than its tap recorded: the bypass
// check must read the DLQ to confirm, find no return the tap missed, and
// leave the run's word ("0 came back", the tap) as the broker has it.
func TestAnotherReadersGiveBacksAreNoBypass(t *testing.T) {
	t.Parallel()
	const n, held = 200, 5
	testkit.EachBroker(t, func(t *testing.T, b testkit.Broker) {
		t.Parallel()
		e, work, dlq, ap := approvedTenth(t, b, n)
		r := e.rabbit
		// The other reader holds the DLQ's first messages (not selected)
		// before the run reads its baseline, and gives them back once the
		// step's copies were all consumed, while the step settles.
		other := r.Channel()
		for i := 0; i < held; i++ {
			if _, ok, err := other.Get(dlq, false); err != nil || !ok {
				t.Fatalf("other reader: get %d: %v", i, err)
			}
		}
		var got atomic.Int64
		r.Consume(work, func(amqp.Delivery) string {
			if got.Add(1) == n/10 {
				if err := other.Nack(0, true, true); err != nil {
					t.Errorf("other reader: give back: %v", err)
				}
			}
			return "ack"
		})
		scans0, _ := e.reads.of(dlq)
		rep, err := e.svc.Run(t.Context(), ap.Replay.ID, "owner")
		if err != nil {
			t.Fatal(err)
		}
		if rep.State != engine.StateFinished || rep.ReturnsMode != engine.ReturnsTap || rep.Returned != 0 || !strings.Contains(rep.Note, "0 came back") {
			t.Fatalf("replay %s mode %q returned %d note %q: want finished through the tap, none back", rep.State, rep.ReturnsMode, rep.Returned, rep.Note)
		}
		// The check saw the growth and read the DLQ once to confirm it.
		if scans, _ := e.reads.of(dlq); scans != scans0+1 {
			t.Fatalf("the run read the DLQ %d time(s), want 1 (the bypass check confirming)", scans-scans0)
		}
		r.WaitCount(dlq, n-n/10, 30*time.Second)
		c, err := e.svc.Check(t.Context(), rep.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if c.Returned != 0 {
			t.Fatalf("check: %d back, want 0", c.Returned)
		}
	})
}

// When the DLQ grew by more than its tap recorded and another consumer
// holds some of its messages, the bypass check's read cannot see them: at
// the run's last judgement it must not finish on "0 came back" (what it
// did not see may be returns), but stop and say why; check, once the other
// consumer let go, counts from the whole DLQ. It waits out the last
// judgement's patience (15 s): on one broker (make test-all: each).
func TestABypassCheckThatCannotSeeTheWholeDLQClaimsNothing(t *testing.T) {
	t.Parallel()
	const n, held = 200, 5
	testkit.EachBrokerIn(t, testkit.ClassicOn(t.Name()), func(t *testing.T, b testkit.Broker) {
		t.Parallel()
		e, work, dlq, ap := approvedTenth(t, b, n)
		r := e.rabbit
		// The handler consumes every copy, and for each the application
		// publishes a failure of its own straight to the DLQ (no copy of
		// the replay: growth the tap cannot see). At the first copy another
		// consumer starts on the DLQ and holds what it gets.
		pub := r.Channel()
		holder := holdAtFirstCopy(t, r, work, dlq, held, nil, func(d amqp.Delivery) string {
			err := pub.PublishWithContext(context.Background(), "", dlq, false, false,
				amqp.Publishing{MessageId: "app-" + d.MessageId, Body: []byte("its own failure")})
			if err != nil {
				t.Errorf("publish to the DLQ: %v", err)
			}
			return "ack"
		})
		rep, _ := e.svc.Run(t.Context(), ap.Replay.ID, "owner")
		if rep.Sent != n/10 || rep.State != engine.StateStopped || rep.ReturnsMode != engine.ReturnsTap ||
			strings.Contains(rep.Note, "came back") || !strings.Contains(rep.Note, "could not tell") {
			t.Fatalf("replay %s sent %d mode %q note %q: want stopped on a tap-mode look that could not tell, all sent", rep.State, rep.Sent, rep.ReturnsMode, rep.Note)
		}
		// The broker's word, once the other consumer let go: no copy of
		// the replay is in the DLQ, and check says so.
		if err := holder.Close(); err != nil {
			t.Fatal(err)
		}
		r.WaitCount(dlq, n, 30*time.Second) // 180 not selected + 20 of the application's own
		c, err := e.svc.Check(t.Context(), rep.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if c.Returned != 0 {
			t.Fatalf("check: %d back, want 0", c.Returned)
		}
	})
}

// approvedTenth fills a classic DLQ fed through a dead-letter exchange (a
// tap) with n dead letters, every tenth from work, previews those, approves
// them in one step on a tapEnv on b, and waits until the approval's
// give-backs (it compared this small DLQ) have landed, as the engine sees
// the DLQ. Another reader that took messages before they all landed would
// keep the count from ever reaching what the next read waits for: that read
// then waits for a management sample newer than the give-back (10-15 s on a
// classic DLQ; engine/amqp mayStillLand), a cost these tests need not pay.
func approvedTenth(t *testing.T, b testkit.Broker, n int) (e *tapEnv, work, dlq string, ap engine.Approval) {
	t.Helper()
	e = newTapEnv(t, b, graceful, nil)
	work, dlq = testkit.Name("work"), testkit.Name("dlq")
	e.rabbit.DLXTopology(work, dlq, nil)
	fillTenth(e.rabbit, dlq, work, n)
	p := preview(t, &e.env, engine.Selection{DLQ: dlq, Source: work})
	if p.Selected != n/10 || p.Returns.Mode != engine.ReturnsTap {
		t.Fatalf("preview selected %d, returns %+v: want %d, the tap", p.Selected, p.Returns, n/10)
	}
	ap, err := replay.Approve(e.svc, t.Context(), p.Token, "U_APP", oneStep, false)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the approval's give-backs to land", func() bool {
		st, err := e.broker.Inspect(t.Context(), dlq)
		return err == nil && st.Ready == n
	})
	return e, work, dlq, ap
}
