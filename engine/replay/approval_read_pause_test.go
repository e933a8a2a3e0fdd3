package replay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestAPauseInAReplayFromItsApprovalsRead pauses a paced replay whose run
// began from its approval's kept read (a classic DLQ fed through the
// default exchange, compared at approval), once its first steps went out.
// The run ends paused, and the read it began from is given back: the DLQ
// holds every message not sent, with no consumer on it, and the consumer
// has exactly the ones sent. Resumed, the run reads the DLQ afresh, with
// a cursor for all its steps, and sends the rest: the broker ends with
// every message at the consumer exactly once and the DLQ empty, with no
// consumer on it. On RabbitMQ 3.10, 4.0 and 4.3 (a classic queue's store
// differs from 3.x to 4.x).
func TestAPauseInAReplayFromItsApprovalsRead(t *testing.T) {
	t.Parallel()
	testkit.EachBrokerIn(t, testkit.Brokers(), func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		pauseInAKeptRead(t, on, 0)
	})
}

// TestAPauseInAReplayFromItsApprovalsReadBesideAnotherReader is
// TestAPauseInAReplayFromItsApprovalsRead with another client taking 20
// messages from the DLQ's head while the replay is paused (basic.get,
// acked): resumed, the replay sends the rest and ends stopped, 20 MISSING,
// never finished; the consumer has every other message once and none of
// the 20, and the DLQ ends empty. On the broker testkit.ClassicOn picks
// (each with DLQBOT_CLASSIC_ALL=1).
func TestAPauseInAReplayFromItsApprovalsReadBesideAnotherReader(t *testing.T) {
	t.Parallel()
	testkit.EachBrokerIn(t, testkit.ClassicOn(t.Name()), func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		pauseInAKeptRead(t, on, 20)
	})
}

// pauseInAKeptRead is TestAPauseInAReplayFromItsApprovalsRead on one
// broker; take messages are taken from the DLQ by another client during
// the pause.
func pauseInAKeptRead(t *testing.T, on testkit.Broker, take int) {
	const n = 600
	ctx := context.Background()
	e, work, dlq := keptDLQ(t, on, nil, n)
	r := e.rabbit
	got := &tailConsumer{acked: map[string]int{}, rejected: map[string]int{}, reject: func(string) bool { return false }}
	r.Consume(work, got.handle)
	ap := previewApproveWith(t, e, dlq, n, engine.Params{Step: 50, Cap: 200, Rate: 100, Timeout: 30 * time.Second})
	if ready, consumers := r.Look(dlq); ready != 0 || consumers != 1 {
		t.Fatalf("right after the approval the DLQ holds %d ready with %d consumer(s): want 0 and 1 (its read kept)", ready, consumers)
	}
	done := runAsync(t, e, ap.Replay.ID)
	testkit.Eventually(t, time.Minute, "the first two steps sent", func() bool {
		cur, _ := e.svc.Status(ctx, ap.Replay.ID)
		return cur.Sent >= 150
	})
	if _, err := e.svc.Control(ctx, ap.Replay.ID, engine.ControlPause, "U_PAUSER"); err != nil {
		t.Fatal(err)
	}
	rep := <-done
	if rep.State != engine.StatePaused || rep.Sent >= n || rep.InDoubt != 0 || !strings.Contains(rep.Note, "paused by U_PAUSER") {
		t.Fatalf("after the pause: %s, %d sent of %d, %d in doubt (%q): want paused by U_PAUSER part way, none in doubt", rep.State, rep.Sent, n, rep.InDoubt, rep.Note)
	}
	sent := rep.Sent
	testkit.Eventually(t, time.Minute, "the read given back: every message not sent in the DLQ, no consumer on it", func() bool {
		ready, consumers := r.Look(dlq)
		return ready == n-sent && consumers == 0
	})
	testkit.Eventually(t, 30*time.Second, "every copy sent at the consumer", func() bool {
		a, _ := got.counts()
		return a == sent
	})
	t.Logf("%s: paused after %d of %d sent", on.Name, sent, n)
	// Another client takes the first take messages (basic.get, acked).
	ch, taken := r.TakeIDs(dlq, take)
	_ = ch.Close()

	if _, err := e.svc.Control(ctx, ap.Replay.ID, engine.ControlResume, "U_RESUMER"); err != nil {
		t.Fatal(err)
	}
	d0 := e.broker.Delivered(dlq)
	rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner2")
	if take > 0 {
		if err != nil || rep.State != engine.StateStopped || rep.Sent != n-take || rep.Missing != take ||
			!strings.Contains(rep.Note, fmt.Sprintf("%d MISSING", take)) {
			t.Fatalf("resumed after another client took %d: %v: %s, %d sent of %d, %d missing: %s; want stopped, %d sent, %d MISSING",
				take, err, rep.State, rep.Sent, n, rep.Missing, rep.Note, n-take, take)
		}
		eachOnceAndEmpty(t, r, got, dlq, n-take)
		for _, id := range taken {
			if got.acked[id] != 0 {
				t.Fatalf("%s, taken from the DLQ by another client during the pause, reached the consumer", id)
			}
		}
		return
	}
	if err != nil || rep.State != engine.StateFinished || rep.Sent != n {
		t.Fatalf("resumed: %v: %s, %d sent of %d: %s", err, rep.State, rep.Sent, n, rep.Note)
	}
	// A resumed run without a tap first notes the copies already back in
	// the DLQ (settle_returns.go) and looks for the returns of a step the
	// pause left unjudged: two reads before its cursor's one.
	read := e.broker.Delivered(dlq) - d0
	t.Logf("%s: the resumed run took %d deliveries from the DLQ of %d", on.Name, read, n-sent)
	if read > int64(3*(n-sent)) {
		t.Fatalf("the resumed run took %d deliveries from the DLQ, which held %d: want at most three reads, not one a step", read, n-sent)
	}
	eachOnceAndEmpty(t, r, got, dlq, n)
}
