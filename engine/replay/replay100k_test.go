package replay_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// whole is the size of the whole-DLQ replays. They skip under the race
// detector, which makes the engine's own code several times slower: make
// test runs them (go test -parallel 8 -run Of100k) in a lane of its own
// without -race. make test replays 100,000 twice: the whole classic DLQ
// on 4.3 (TestWholeDLQReplayOf100k) and the filtered quorum DLQ on 4.0
// (TestFilteredReplayReadsTheDLQOnceOf100k); every other case at this
// size runs with DLQBOT_100K_ALL=1 (make test-all), on every broker, and
// its smaller sibling runs in make test (each test says which): five
// fills of 100,000 beside the other lanes took the suite past its ten
// minutes on two cores.
const whole = 100000

// only100kAll skips t unless DLQBOT_100K_ALL=1 (make test-all); sibling
// names the test that asks the same at a smaller size in make test.
func only100kAll(t *testing.T, sibling string) {
	t.Helper()
	if os.Getenv("DLQBOT_100K_ALL") == "" {
		t.Skip("with DLQBOT_100K_ALL=1 (make test-all); make test runs " + sibling)
	}
}

// skipUnderRace skips a whole-DLQ replay under -race and -short.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("100,000 messages")
	}
	if raceOn {
		t.Skip("100,000 messages: make test runs the Of100k tests again without -race")
	}
}

// bigDLQ is a DLQ filled with whole dead letters and a target queue with a
// consumer counting what reaches it.
type bigDLQ struct {
	e           *env
	on          testkit.Broker
	dlq, target string
	got         *counter
}

// fillBig declares a DLQ with dlqArgs on broker on (a policy can be set on
// it first by policy, given the DLQ's name), fills it with whole dead
// letters of 1 KB and starts the target's consumer.
func fillBig(t *testing.T, on testkit.Broker, dlqArgs amqp.Table, policy func(dlq string)) *bigDLQ {
	t.Helper()
	cfg := fast
	cfg.LeaseTTL = 15 * time.Second // the default: a long step on a loaded machine
	e := newEnvOn(t, cfg, on)
	r := e.rabbit
	src, dlq, target := testkit.Name("src"), testkit.Name("dlq"), testkit.Name("tgt")
	if policy != nil {
		policy(dlq)
	}
	r.Queue(dlq, dlqArgs)
	r.Queue(target, nil)
	start := time.Now()
	r.DeadLettersInto(dlq, src, whole, 1024)
	t.Logf("%s: fill of %d in %v", on.Name, whole, time.Since(start).Round(time.Millisecond))
	b := &bigDLQ{e: e, on: on, dlq: dlq, target: target, got: &counter{}}
	r.Consume(target, b.got.handle)
	return b
}

// preview previews the whole DLQ and checks that it read every message.
func (b *bigDLQ) preview(t *testing.T) *engine.Preview {
	t.Helper()
	start := time.Now()
	p, err := b.e.svc.Preview(context.Background(), engine.Selection{DLQ: b.dlq, To: b.target}, "U_REQ")
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	if p.Selected != whole || p.Coverage.Read != whole || !p.Coverage.Whole() || p.Token == "" {
		t.Fatalf("preview after %v: selected %d, scanned %d, coverage %+v, token %q, problems %+v; the DLQ's ready count now %d; want all %d read",
			time.Since(start).Round(time.Millisecond), p.Selected, p.Scanned, p.Coverage, p.Token, p.Problems, b.e.rabbit.Count(b.dlq), whole)
	}
	t.Logf("%s: preview of %d in %v; the DLQ's ready count right after it: %d", b.on.Name, whole, time.Since(start).Round(time.Millisecond), b.e.rabbit.Count(b.dlq))
	return p
}

// approveRun approves token with prm and runs the replay, timing both.
func (b *bigDLQ) approveRun(t *testing.T, token string, prm engine.Params) engine.Replay {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	ap, err := replay.Approve(b.e.svc, ctx, token, "U_APP", prm, false)
	if err != nil {
		t.Fatalf("approve: %v: %+v", err, ap.Changes)
	}
	t.Logf("%s: approval in %v", b.on.Name, time.Since(start).Round(time.Millisecond))
	return b.run(t, ap.Replay.ID, "owner")
}

// run runs replay id as owner, timing it.
func (b *bigDLQ) run(t *testing.T, id, owner string) engine.Replay {
	t.Helper()
	start := time.Now()
	rep, err := b.e.svc.Run(context.Background(), id, owner)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	t.Logf("%s: run ended %s after %v: sent %d of %d: %s", b.on.Name, rep.State, time.Since(start).Round(time.Millisecond), rep.Sent, rep.Total, rep.Note)
	return rep
}

// expectBroker checks what the broker and the ledger say after sent
// copies of the whole were sent: the target consumer got sent distinct
// messages, once each, and the target holds nothing; the DLQ holds the
// rest with no consumer holding any; and the ledger has exactly sent
// confirmed entries, none pending. (The broker's own state decides, not
// the management API's counters, which can lose a closed channel's last
// statistics.)
func (b *bigDLQ) expectBroker(t *testing.T, replayID string, sent int) {
	t.Helper()
	r := b.e.rabbit
	ctx := context.Background()
	testkit.Eventually(t, 90*time.Second, "the target consumer to get every copy sent", func() bool { return b.got.n.Load() >= int64(sent) })
	testkit.Eventually(t, 60*time.Second, "the target to hold nothing", func() bool { return r.Count(b.target) == 0 })
	if n := b.got.n.Load(); n != int64(sent) {
		t.Fatalf("target consumer got %d deliveries, want %d", n, sent)
	}
	b.got.mu.Lock()
	distinct := len(b.got.ids)
	b.got.mu.Unlock()
	if distinct != sent {
		t.Fatalf("target got %d distinct messages, want %d", distinct, sent)
	}
	testkit.Eventually(t, 60*time.Second, "the DLQ to hold the rest, no consumer holding any", func() bool {
		ready, consumers := r.Look(b.dlq)
		return ready == whole-sent && consumers == 0
	})
	entries, err := b.e.store.Ledger().Entries(ctx, replayID)
	if err != nil {
		t.Fatal(err)
	}
	confirmed, ledgerIDs := 0, map[string]bool{}
	for _, en := range entries {
		if en.Pending {
			t.Fatalf("ledger entry %s still pending", en.ID)
		}
		confirmed++
		ledgerIDs[en.ID] = true
	}
	if confirmed != sent || len(ledgerIDs) != sent {
		t.Fatalf("ledger has %d confirmed sends of %d messages, want %d of %d", confirmed, len(ledgerIDs), sent, sent)
	}
}

// expectFinished checks that rep finished exactly (sent == total == whole,
// nothing missing or failed) and what the broker and ledger say.
func (b *bigDLQ) expectFinished(t *testing.T, rep engine.Replay) {
	t.Helper()
	if rep.State != engine.StateFinished || rep.Sent != whole || rep.Total != whole || rep.Missing != 0 || rep.Failed != 0 || rep.InDoubt != 0 {
		t.Fatalf("replay %s: state %s, sent %d of %d, missing %d, failed %d, in doubt %d: %s; want finished with all %d sent",
			rep.ID, rep.State, rep.Sent, rep.Total, rep.Missing, rep.Failed, rep.InDoubt, rep.Note, whole)
	}
	b.expectBroker(t, rep.ID, whole)
}

// allAtOnce sends the whole DLQ in one unpaced step.
var allAtOnce = engine.Params{Step: whole, Cap: whole, Rate: -1, Timeout: 60 * time.Second}

// TestWholeDLQReplayOf100k replays a classic DLQ of 100,000 dead letters in
// one unpaced step, on RabbitMQ 4.3 (every broker with DLQBOT_100K_ALL=1:
// on 3.10, which make test's other lanes use the most, the fill and the
// replay took seven and a half minutes beside them): every message is found and
// sent, none is called missing (before: a read ended at the first 3 s pause in
// deliveries and the rest were reported missing though still in the DLQ).
func TestWholeDLQReplayOf100k(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	testkit.EachBrokerIn(t, brokers100k(testkit.Rabbit43.Name), func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		b := fillBig(t, on, nil, nil)
		p := b.preview(t)
		b.expectFinished(t, b.approveRun(t, p.Token, allAtOnce))
	})
}

// TestQuorumDLQReplayOf100k replays a quorum DLQ of 100,000 dead letters in
// one unpaced step, with DLQBOT_100K_ALL=1 on every broker (make test's
// quorum DLQ of 100,000 is TestFilteredReplayReadsTheDLQOnceOf100k's),
// declared without a delivery limit (RabbitMQ 4.0 and 4.3 apply their
// default of 20, 3.10 none): the preview, the approval's compare, the move
// and the look for returns each
// read the DLQ and give back what they do not take, and none of it may be
// dropped. 4.3 counts none of those give-backs: its preview shows no
// budget. The replay finishes with every message sent exactly once.
func TestQuorumDLQReplayOf100k(t *testing.T) {
	skipUnderRace(t)
	only100kAll(t, "TestFilteredReplayReadsTheDLQOnceOf100k on a 4.0 quorum DLQ")
	t.Parallel()
	for _, tc := range []struct {
		name string
		args amqp.Table
	}{
		// A small explicit limit at this size is TestQuorumDLQReplayOf100kStoppedByBudget's
		// (a policy of 5); smaller DLQs with an argument limit are
		// TestReadBudgetStopsAndResumesOnceRaised's.
		{"no-limit-set", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testkit.EachBrokerIn(t, testkit.Brokers(), func(t *testing.T, on testkit.Broker) {
				t.Parallel()
				b := fillBig(t, on, testkit.Quorum(tc.args), nil)
				p := b.preview(t)
				var limit int
				var from string
				switch {
				case tc.args != nil:
					limit, from = 10, "argument"
				case on.RequeueCounts() && on.DefaultDeliveryLimit() > 0:
					limit, from = 20, "default" // 4.0; 3.10 has none, 4.3 counts no give-back
				}
				if limit == 0 && p.Budget != nil || limit > 0 && (p.Budget == nil || p.Budget.Limit != limit || p.Budget.LimitFrom != from) {
					t.Fatalf("preview budget %+v, want a limit of %d (%q; 0: none)", p.Budget, limit, from)
				}
				b.expectFinished(t, b.approveRun(t, p.Token, allAtOnce))
			})
		})
	}
}

// TestQuorumDLQReplayOf100kStoppedByBudget gives a quorum DLQ of 100,000 on
// RabbitMQ 4.0 a delivery limit of 5 by policy and replays it in two steps
// of 50,000. The preview (count 1) and the first step's move (2) and look
// for returns (3) leave one read, and the second step needs two: the
// replay stops by the read budget, saying so, with 50,000 sent and the
// other 50,000 still in the DLQ. (An approval that compares, when its
// proof fails, reads once more, and the budget stops the replay before the
// same step. With a limit of 6 it stopped only when the approval compared,
// which on 4.0 it did while the proof gave up on a lag.) Once the policy raises the limit, a
// resume sends them and the replay finishes exactly.
func TestQuorumDLQReplayOf100kStoppedByBudget(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	// Where give-backs count (on 4.3 the replay would simply finish, which
	// TestQuorumDLQReplayOf100k shows at this size), on 4.0, with
	// DLQBOT_100K_ALL=1: TestReadBudgetStopsAndResumesOnceRaised stops and
	// resumes at a small size on every broker in make test, whose 100k
	// lane keeps within its time without this fill.
	only100kAll(t, "TestReadBudgetStopsAndResumesOnceRaised")
	testkit.EachBrokerIn(t, testkit.Named(testkit.Rabbit4.Name), func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		ctx := context.Background()
		policy := testkit.Name("limit")
		b := fillBig(t, on, testkit.Quorum(nil), func(dlq string) {
			on.SetPolicy(t, policy, "^"+dlq+"$", map[string]any{"delivery-limit": 5})
		})
		waitLimit(t, b.e, b.dlq, 5)
		p := b.preview(t)
		if p.Budget == nil || p.Budget.Limit != 5 || p.Budget.LimitFrom != "policy" {
			t.Fatalf("preview budget %+v, want limit 5 from policy", p.Budget)
		}
		half := whole / 2
		rep := b.approveRun(t, p.Token, engine.Params{Step: half, Cap: half, Rate: -1, Timeout: 60 * time.Second})
		if rep.State != engine.StateStopped || !strings.Contains(rep.Note, "read budget") || rep.Sent != half || rep.Missing != 0 || rep.Failed != 0 {
			t.Fatalf("replay %s, %d sent, %d missing, %d failed: %s; want stopped by the read budget after %d", rep.State, rep.Sent, rep.Missing, rep.Failed, rep.Note, half)
		}
		if !strings.Contains(rep.Note, "delivery limit of 5") {
			t.Errorf("the stop does not name the limit: %s", rep.Note)
		}
		b.expectBroker(t, rep.ID, half)

		on.SetPolicy(t, policy, "^"+b.dlq+"$", map[string]any{"delivery-limit": 100})
		waitLimit(t, b.e, b.dlq, 100)
		if _, err := b.e.svc.Control(ctx, rep.ID, engine.ControlResume, "U_RES"); err != nil {
			t.Fatal(err)
		}
		b.expectFinished(t, b.run(t, rep.ID, "owner-2"))
	})
}

// brokers100k are the named brokers in make test's 100k stage, or all of
// them with DLQBOT_100K_ALL=1: the stage runs each case where it tells
// something, to keep within its time (docs/reliability.md "Tests and benchmarks" has the table).
func brokers100k(names ...string) []testkit.Broker {
	if os.Getenv("DLQBOT_100K_ALL") != "" {
		return testkit.Brokers()
	}
	return testkit.Named(names...)
}
