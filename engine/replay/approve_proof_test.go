package replay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestApprovalOfUnchangedPreviewReadsNothing is issue 23's approval
// without a read, at 1,000 messages, a quorum and a classic DLQ, each on
// one broker (everyDLQKindOn):
// approving an unchanged preview does not read the DLQ (the engine makes
// no read of it, counted as it makes them: the management deliver_get
// missed reads whose channels closed between two samples, on 3.10, 4.0
// and 4.3), and the replay then sends every message exactly once.
// After one previewed message was consumed by someone else, the approval
// falls back to reading the DLQ and shows the change before anything is
// sent.
func TestApprovalOfUnchangedPreviewReadsNothing(t *testing.T) {
	t.Parallel()
	for _, consumed := range []bool{false, true} {
		name := "unchanged"
		if consumed {
			name = "one-consumed"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			everyDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
				n := 1000
				cfg := fast
				cfg.Tune.ProofFrom = 1 // the proof at 1,000 (by default a DLQ this small is compared)
				e := newEnvOn(t, cfg, on)
				src, dlq := e.rabbit.DeadLetteredAs(dlqArgs, n, 100)
				rec := &recorder{}
				e.rabbit.Consume(src, rec.handle)
				// RabbitMQ 4.0's quorum statistics can lag by more than the
				// approval waits (over a minute, measured): there the proof
				// may fail and the approval compare, which is safe and slower.
				lagging := on.Name == testkit.Rabbit4.Name && dlqArgs != nil
				approveWithoutRead(t, e, dlq, n, engine.Selection{DLQ: dlq}, consumed, lagging, func() int { return len(rec.got()) })
			})
		})
	}
}

// TestApprovalWithoutReadOf100k is the same on a DLQ of 100,000, on every
// broker and kind with DLQBOT_100K_ALL=1 (make test's filtered 100k test
// checks the approval's reads at this size, on a 4.0 quorum DLQ). The
// approval of the unchanged preview reads nothing, and the replay that
// follows it is exact. Under load 4.3's statistics lagged past the proof's
// old wait (twice StatsLag) and the approval compared; it now waits for a
// sample that has caught up.
func TestApprovalWithoutReadOf100k(t *testing.T) {
	skipUnderRace(t)
	only100kAll(t, "TestFilteredReplayReadsTheDLQOnceOf100k, whose approval of its unchanged preview reads nothing (4.0 quorum)")
	t.Parallel()
	everyDLQKindOn(t, testkit.Brokers(), func(t *testing.T, on testkit.Broker, args amqp.Table) {
		b := fillBig(t, on, args, nil)
		// As at 1,000: 4.0's quorum statistics can lag past any wait.
		lagging := on.Name == testkit.Rabbit4.Name && args != nil
		approveWithoutRead(t, b.e, b.dlq, whole, engine.Selection{DLQ: b.dlq, To: b.target}, false, lagging, func() int { return int(b.got.n.Load()) })
	})
}

// approveWithoutRead previews sel (the whole dlq of n messages), lets
// someone else consume one message of it when consumed, approves, and
// decides on the engine's reads of the DLQ (env.scans) whether the approval read it;
// an unchanged preview is then run to the end and every copy counted at
// the consumer (got).
// mayCompare tolerates an approval of an unchanged preview that compared
// (a broker whose statistics lag past the proof's wait), logged.
func approveWithoutRead(t *testing.T, e *env, dlq string, n int, sel engine.Selection, consumed, mayCompare bool, got func() int) {
	t.Helper()
	ctx := context.Background()
	// A DLQ the management API has sampled (a new queue has no sample
	// yet, and then nothing can be proven: the approval would compare).
	testkit.Eventually(t, 60*time.Second, "a management sample of the full DLQ", func() bool {
		cs, err := e.broker.Counters(ctx, dlq)
		return err == nil && !cs.SampledAt.IsZero() && cs.Ready == n && cs.Unacked == 0
	})
	p, err := e.svc.Preview(ctx, sel, "U_REQ")
	if err != nil || p.Selected != n || p.Token == "" {
		t.Fatalf("preview: %v, selected %d of %d", err, p.Selected, n)
	}
	if consumed {
		// Someone else takes one previewed message (consumed and acked).
		testkit.Eventually(t, 60*time.Second, "the preview's give-backs in the DLQ", func() bool { return e.rabbit.Count(dlq) == n })
		d, ok, err := e.rabbit.Channel().Get(dlq, false)
		if err != nil || !ok {
			t.Fatalf("the other consumer's get: %v, %v", ok, err)
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	// A person approves after the preview's give-backs are back (a
	// quorum DLQ takes them back late; until then the proof fails safe).
	left := n
	if consumed {
		left--
	}
	testkit.Eventually(t, 60*time.Second, "the preview's give-backs in the DLQ", func() bool { return e.rabbit.Count(dlq) == left })
	start := time.Now()
	scans := e.scans.scans.Load()
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Step: 100, Cap: 100000, Rate: -1, Timeout: time.Minute}, false)
	took := time.Since(start)
	read := e.scans.scans.Load() > scans
	t.Logf("approval in %v; it read the DLQ: %v", took.Round(time.Millisecond), read)
	if consumed {
		gone := changed(ap.Changes, engine.ChangeMessagesGone)
		if !errors.Is(err, engine.ErrChanged) || gone != 1 {
			t.Fatalf("approval after one message was consumed: %v, changes %+v; want ErrChanged with 1 message gone", err, ap.Changes)
		}
		if !read {
			t.Errorf("the approval found the change without reading the DLQ?")
		}
		return
	}
	if err != nil {
		t.Fatalf("approval of an unchanged preview: %v, changes %+v", err, ap.Changes)
	}
	if read && mayCompare {
		t.Logf("the approval compared (this broker's statistics lagged past the proof's wait)")
	} else if read {
		t.Errorf("the approval of an unchanged preview read the DLQ")
	}
	rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner")
	if err != nil || rep.State != engine.StateFinished || rep.Sent != n {
		t.Fatalf("run: %v, %s, sent %d of %d: %s", err, rep.State, rep.Sent, n, rep.Note)
	}
	testkit.Eventually(t, 90*time.Second, "every copy at the consumer", func() bool { return got() >= n })
	if g := got(); g != n {
		t.Errorf("the consumer got %d copies, want %d", g, n)
	}
}

// changed sums the messages of the changes of kind.
func changed(cs []engine.Change, kind engine.ChangeKind) int {
	n := 0
	for _, c := range cs {
		if c.Kind == kind {
			n += c.Messages
		}
	}
	return n
}
