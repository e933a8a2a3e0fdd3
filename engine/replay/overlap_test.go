package replay_test

import (
	"context"
	"slices"
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

// TestOverlappingReplaysSendEachOnce is issue 22's case 1 at a tenth of
// its size (DLQBOT_OVERLAP_SCALE=10 for the 1,500 and 2,000 with
// 1,000 in common): two previews of one DLQ overlap, both are approved
// before either sends, and both run at once, from a quorum DLQ on every
// broker and a classic one on one (everyDLQKind). Decided against the consumer and the DLQ:
// every message was delivered exactly once, with one of the two replay
// ids, and the DLQ is empty; both replays end finished, each naming the
// other for the messages it left to it, none called missing or held.
func TestOverlappingReplaysSendEachOnce(t *testing.T) {
	t.Parallel()
	everyDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		scale := envScale(t, "DLQBOT_OVERLAP_SCALE", 1)
		onlyA, both, onlyB := 50*scale, 100*scale, 100*scale // A: 150, B: 200, 100 in common
		n := onlyA + both + onlyB
		if dlqArgs != nil {
			// Two replays read the DLQ at every step: raise RabbitMQ 4's
			// default delivery limit (20), which the read budget guards.
			dlqArgs = testkit.Quorum(amqp.Table{"x-delivery-limit": 200})
		}
		cfg := fast
		cfg.Log = zerolog.New(testLog(t)).Level(zerolog.InfoLevel) // the cursors' opens and releases
		e := newEnvOn(t, cfg, on)
		r := e.rabbit
		src, dlq := r.DeadLetteredAs(dlqArgs, n, 100)
		all := preview(t, e, engine.Selection{DLQ: dlq})
		if len(all.Messages) != n {
			t.Fatalf("the whole preview lists %d of %d messages", len(all.Messages), n)
		}
		var idsA, idsB []string
		for i, m := range all.Messages {
			if i < onlyA+both {
				idsA = append(idsA, m.ID)
			}
			if i >= onlyA {
				idsB = append(idsB, m.ID)
			}
		}
		pa := previewToken(t, e, engine.Selection{DLQ: dlq, IDs: idsA})
		pb := previewToken(t, e, engine.Selection{DLQ: dlq, IDs: idsB})
		rec := &recorder{}
		r.Consume(src, rec.handle)
		ctx := context.Background()
		prm := engine.Params{Step: 10, Cap: 100 * scale, Rate: 400, Timeout: 30 * time.Second}
		apA, err := replay.Approve(e.svc, ctx, pa.Token, "U_A", prm, true)
		if err != nil {
			t.Fatal(err)
		}
		apB, err := replay.Approve(e.svc, ctx, pb.Token, "U_B", prm, true)
		if err != nil {
			t.Fatal(err)
		}
		ra, rb := runAsyncReplay(t, e, apA.Replay.ID, "owner-a"), runAsyncReplay(t, e, apB.Replay.ID, "owner-b")
		reps := map[string]engine.Replay{}
		for _, ch := range []chan engine.Replay{ra, rb} {
			select {
			case rep := <-ch:
				reps[rep.ID] = rep
			case <-time.After(5 * time.Minute):
				t.Fatal("the overlapping replays did not end within 5 minutes")
			}
		}
		a, b := reps[apA.Replay.ID], reps[apB.Replay.ID]
		for _, rep := range []engine.Replay{a, b} {
			t.Logf("%s: %s, sent %d of %d, replayed elsewhere %d, missing %d: %s", rep.ID, rep.State, rep.Sent, rep.Total, rep.Elsewhere, rep.Missing, rep.Note)
		}
		if a.Sent+b.Sent != n || a.Sent+a.Elsewhere != a.Total || b.Sent+b.Elsewhere != b.Total || a.Elsewhere+b.Elsewhere != both {
			t.Errorf("sent %d + %d of %d, elsewhere %d + %d of %d in common", a.Sent, b.Sent, n, a.Elsewhere, b.Elsewhere, both)
		}
		for _, pair := range [][2]engine.Replay{{a, b}, {b, a}} {
			rep, other := pair[0], pair[1]
			if rep.State != engine.StateFinished || rep.Missing != 0 {
				t.Errorf("%s ended %s with %d missing: %s; want finished", rep.ID, rep.State, rep.Missing, rep.Note)
			}
			if rep.Elsewhere > 0 && !strings.Contains(rep.Note, other.ID) {
				t.Errorf("%s's note does not name %s: %s", rep.ID, other.ID, rep.Note)
			}
			for _, f := range rep.Failures {
				if f.Kind == engine.FailureMissing || f.Kind == engine.FailureHeldElsewhere {
					t.Errorf("%s: %s %s: %s", rep.ID, f.ID, f.Kind, f.Detail)
				}
				if f.Kind == engine.FailureReplayedElsewhere && !strings.Contains(f.Detail, other.ID) {
					t.Errorf("%s: %s left to another replay without naming %s: %s", rep.ID, f.ID, other.ID, f.Detail)
				}
			}
		}
		// The broker's side.
		testkit.Eventually(t, 60*time.Second, "every message at the consumer", func() bool { return len(rec.got()) >= n && r.Count(src) == 0 })
		got := rec.got()
		by := ids(got)
		for _, m := range all.Messages {
			if by[m.MessageID] != 1 {
				t.Errorf("%s delivered %d times", m.MessageID, by[m.MessageID])
			}
		}
		for _, d := range got {
			if id := d.Headers["x-replay-id"]; id != a.ID && id != b.ID {
				t.Errorf("%s delivered with x-replay-id %v", d.MessageId, id)
			}
		}
		if left := r.Count(dlq); left != 0 {
			t.Errorf("the DLQ still holds %d messages", left)
		}
	})
}

// runAsyncReplay runs replay id as owner in the background.
func runAsyncReplay(t testing.TB, e *env, id, owner string) chan engine.Replay {
	ch := make(chan engine.Replay, 1)
	go func() {
		rep, err := e.svc.Run(context.Background(), id, owner)
		if err != nil {
			t.Errorf("run %s: %v", id, err)
		}
		ch <- rep
	}()
	return ch
}

// everyDLQKind runs f as subtests for a classic and a quorum DLQ: the
// classic one on the broker testkit.ClassicOn picks for the test, the
// quorum one on the broker testkit.QuorumOn picks (every broker for both
// with DLQBOT_CLASSIC_ALL=1, make test-all).
func everyDLQKind(t *testing.T, f func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table)) {
	t.Helper()
	everyDLQKindOn(t, testkit.Brokers(), f)
}

// everyDLQKindOn is everyDLQKind on the brokers on: classic on the one of
// them testkit.ClassicOn picks (the first of on when it picks another),
// quorum on the one quorumAmong picks, or both on all of them with
// DLQBOT_CLASSIC_ALL=1.
func everyDLQKindOn(t *testing.T, on []testkit.Broker, f func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table)) {
	t.Helper()
	for _, kind := range []struct {
		name    string
		args    amqp.Table
		brokers []testkit.Broker
	}{{"classic", nil, classicAmong(t.Name(), on)}, {"quorum", testkit.Quorum(nil), quorumAmong(t.Name(), on)}} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			testkit.EachBrokerIn(t, kind.brokers, func(t *testing.T, on testkit.Broker) {
				t.Parallel()
				f(t, on, kind.args)
			})
		})
	}
}

// classicAmong is the brokers of on a classic-queue case of the test named
// key runs on: testkit.ClassicOn's pick when it is one of on, else on's
// first; all of on with DLQBOT_CLASSIC_ALL=1 or when on is one broker.
func classicAmong(key string, on []testkit.Broker) []testkit.Broker {
	if testkit.AllBrokers() || len(on) < 2 {
		return on
	}
	pick := testkit.ClassicOn(key)[0]
	for _, b := range on {
		if b.Name == pick.Name {
			return []testkit.Broker{b}
		}
	}
	return on[:1]
}

// quorumAmong is the brokers of on a quorum-queue case of the test named
// key runs on: testkit.QuorumOn's pick when it is one of on, else on's
// last; all of on with DLQBOT_CLASSIC_ALL=1 or when on is one broker. A
// quorum queue's rules that differ by version (RequeueCounts,
// DefaultDeliveryLimit) are the tests' that run on every broker
// (testkit.EachBroker), not these scenarios'.
func quorumAmong(key string, on []testkit.Broker) []testkit.Broker {
	if testkit.AllBrokers() || len(on) < 2 {
		return on
	}
	pick := testkit.QuorumOn(key)[0]
	for _, b := range on {
		if b.Name == pick.Name {
			return []testkit.Broker{b}
		}
	}
	return on[len(on)-1:]
}

// TestASettlingCursorGivesWayToAnotherReplay: replay A reads the whole DLQ
// through its cursor, sends the first half of its half in step 1 and
// settles for a long grace, its cursor holding the rest of the DLQ
// unacknowledged for step 2; replay B of the other half is approved
// meanwhile, with a held-wait far shorter than A's grace. A's read is
// dlqbot's, not "another client": A gives back what its cursor holds as
// soon as B looks for it, and B sends its half while A's step 1 still
// settles. Decided against the consumer: every message delivered once,
// B's first before A's step 2 began. A quorum and a classic DLQ, each on
// one broker (eachDLQKind).
func TestASettlingCursorGivesWayToAnotherReplay(t *testing.T) {
	t.Parallel()
	eachDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) { // classic on one broker (testkit.ClassicOn)
		const half = 100
		cfg := fast
		cfg.SettleGrace, cfg.Tune.HeldWait = 25*time.Second, 4*time.Second
		cfg.Log = zerolog.New(testLog(t)).Level(zerolog.InfoLevel) // the cursor's releases and why
		ev := &events{}
		// Without the target's counters no step is proven settled early:
		// A waits its whole grace.
		e := newEnvTuned(t, cfg, on, func(d *replay.Deps) { d.Notifier, d.Counters = ev, testkit.CountersOff{} })
		r := e.rabbit
		// A DLQ fed through an exchange of its own: the replays find
		// returns through a tap, and read through a cursor.
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.DLXTopology(src, dlq, dlqArgs)
		r.Reject(src, testkit.Msgs(2*half, 100)...)
		r.WaitCount(dlq, 2*half, time.Minute)
		all := preview(t, e, engine.Selection{DLQ: dlq})
		if len(all.Messages) != 2*half {
			t.Fatalf("the whole preview lists %d of %d messages", len(all.Messages), 2*half)
		}
		var idsA, idsB, msgsB []string
		for i, m := range all.Messages {
			if i < half {
				idsA = append(idsA, m.ID)
			} else {
				idsB, msgsB = append(idsB, m.ID), append(msgsB, m.MessageID)
			}
		}
		pa := previewToken(t, e, engine.Selection{DLQ: dlq, IDs: idsA})
		pb := previewToken(t, e, engine.Selection{DLQ: dlq, IDs: idsB})
		var mu sync.Mutex
		firstB := time.Time{}
		rec := &recorder{}
		r.Consume(src, func(d amqp.Delivery) string {
			mu.Lock()
			if firstB.IsZero() && slices.Contains(msgsB, d.MessageId) {
				firstB = time.Now()
			}
			mu.Unlock()
			return rec.handle(d)
		})
		ctx := context.Background()
		prm := engine.Params{Step: half, Cap: half, Rate: -1, Timeout: 2 * time.Minute}
		prmA := prm
		prmA.Step, prmA.Cap = half/2, half/2
		apA, err := replay.Approve(e.svc, ctx, pa.Token, "U_A", prmA, true)
		if err != nil {
			t.Fatal(err)
		}
		ra := runAsyncReplay(t, e, apA.Replay.ID, "owner-a")
		testkit.Eventually(t, time.Minute, "A's step 1 at the consumer", func() bool { return len(rec.got()) >= half/2 })
		apB, err := replay.Approve(e.svc, ctx, pb.Token, "U_B", prm, true)
		if err != nil {
			t.Fatal(err)
		}
		rb := runAsyncReplay(t, e, apB.Replay.ID, "owner-b")
		var a, b engine.Replay
		for _, ch := range []chan engine.Replay{ra, rb} {
			select {
			case rep := <-ch:
				if rep.ID == apA.Replay.ID {
					a = rep
				} else {
					b = rep
				}
			case <-time.After(4 * time.Minute):
				t.Fatal("the replays did not end within 4 minutes")
			}
		}
		for _, rep := range []engine.Replay{a, b} {
			if rep.State != engine.StateFinished || rep.Sent != half || rep.Missing != 0 {
				t.Errorf("%s: %s, sent %d of %d, missing %d: %s; want finished with all %d sent", rep.ID, rep.State, rep.Sent, rep.Total, rep.Missing, rep.Note, half)
			}
			for _, f := range rep.Failures {
				if f.Kind == engine.FailureHeldElsewhere || f.Kind == engine.FailureMissing {
					t.Errorf("%s: %s %s: %s", rep.ID, f.ID, f.Kind, f.Detail)
				}
			}
		}
		testkit.Eventually(t, time.Minute, "every message at the consumer", func() bool { return len(rec.got()) >= 2*half })
		by := ids(rec.got())
		for _, m := range all.Messages {
			if by[m.MessageID] != 1 {
				t.Errorf("%s delivered %d times", m.MessageID, by[m.MessageID])
			}
		}
		var a2 time.Time
		for _, x := range ev.snapshot() {
			if x.Replay.ID == a.ID && x.Kind == engine.EventStepStarted && x.Step != nil && x.Step.Step == 2 {
				a2 = x.At
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if firstB.IsZero() || a2.IsZero() || !firstB.Before(a2) {
			t.Errorf("B's first copy reached the consumer at %v, A's step 2 began at %v: want B's copies while A's step 1 settled", firstB, a2)
		}
		if left := r.Count(dlq); left != 0 {
			t.Errorf("the DLQ still holds %d messages", left)
		}
	})
}

// previewToken previews sel until the preview makes a token, for up to two
// minutes: a quorum DLQ on 3.10 takes back the previous preview's
// give-backs late, and a read that finds them still held says so and
// makes no token (what an engineer does then is preview again).
func previewToken(t *testing.T, e *env, sel engine.Selection) *engine.Preview {
	t.Helper()
	var p *engine.Preview
	testkit.Eventually(t, 2*time.Minute, "a preview with a token", func() bool {
		var err error
		if p, err = e.svc.Preview(context.Background(), sel, "U_REQ"); err != nil {
			t.Fatal(err)
		}
		if p.Token == "" {
			t.Logf("preview without a token: coverage %+v", p.Coverage)
		}
		return p.Token != ""
	})
	return p
}
