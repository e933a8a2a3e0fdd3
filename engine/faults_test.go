package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	broker "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// TestConnectionsClosedMidReplayLoseNothing closes every broker connection
// of the replaying engine in the middle of a 1,000-message replay: every
// message must end in the DLQ or the target, and any duplicate must be in
// the ledger. Resuming then sends the rest without re-sending recorded ones.
func TestConnectionsClosedMidReplayLoseNothing(t *testing.T) {
	t.Parallel()
	e, connName := newFaultEnv(t)
	st, svc := e.store, e.svc
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	msgs := testkit.Msgs(1000, 200)
	r.Reject(src, msgs...)
	r.WaitCount(dlq, 1000, 30*time.Second)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	testkit.Eventually(t, 20*time.Second, "the engine's connection in the management API", func() bool {
		return testkit.CountConnections(t, connName) > 0
	})
	rec := &recorder{}
	r.Consume(src, rec.handle)

	ctx := context.Background()
	ap, err := svc.Approve(ctx, p.Token, "U_APP", engine.Params{Step: 1000, Cap: 1000, Rate: 100, Timeout: 20 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan engine.Replay, 1)
	go func() { rep, _ := svc.Run(ctx, ap.Replay.ID, "owner"); done <- rep }()
	testkit.Eventually(t, 20*time.Second, "300 sent", func() bool { return len(rec.got()) >= 300 })
	if n := testkit.CloseConnections(t, connName); n == 0 {
		t.Fatal("no connection of the replaying engine found to close")
	}
	rep := <-done
	if rep.State == engine.StateFinished && rep.Sent == 1000 {
		t.Fatal("the fault came too late: the replay finished")
	}
	t.Logf("after the fault: state %s, sent %d, duplicates %d, failed %d: %s", rep.State, rep.Sent, rep.Duplicates, rep.Failed, rep.Note)

	check := func(stage string) map[string]int {
		t.Helper()
		// Let deliveries and requeues land: the DLQ plus what the target
		// consumer got must account for every message.
		var delivered, inDLQ map[string]int
		testkit.Eventually(t, 30*time.Second, stage+": DLQ + target to account for 1000", func() bool {
			total := len(rec.got()) + r.Count(dlq)
			// Every copy already published has reached the consumer too:
			// a copy still waiting in the target is not a later resend.
			return total >= 1000 && r.Count(src) == 0
		})
		delivered = ids(rec.got())
		left := r.Drain(dlq, r.Count(dlq), 10*time.Second) // by count: a pause is no end
		inDLQ = ids(left)
		originals := make([]string, len(msgs))
		for i, m := range msgs {
			originals[i] = m.MessageId
		}
		lost, dups := testkit.NoneLost(originals, delivered, inDLQ)
		if len(lost) > 0 {
			t.Fatalf("%s: %s", stage, testkit.Describe(lost, dups))
		}
		r.Publish(dlq, republish(left)...) // put the drained ones back for the next stage
		r.WaitCount(dlq, len(left), 20*time.Second)
		return dups
	}
	dups := check("after the fault")
	entries, err := st.Ledger().Entries(ctx, ap.Replay.ID)
	if err != nil {
		t.Fatal(err)
	}
	byMsgID := map[string]string{} // message_id → fingerprint
	for _, m := range p.Messages {
		byMsgID[m.MessageID] = m.ID
	}
	inLedger := map[string]bool{}
	for _, en := range entries {
		inLedger[en.ID] = true
	}
	for mid, n := range dups {
		if n > 1 {
			t.Errorf("%s duplicated %d times by one fault", mid, n)
		}
		if !inLedger[byMsgID[mid]] {
			t.Errorf("duplicate %s is not in the ledger", mid)
		}
	}
	t.Logf("duplicates after one fault: %d (all in the ledger)", len(dups))

	// Resume: the rest is sent, nothing the ledger recorded is sent again.
	if _, err := svc.Resume(ctx, ap.Replay.ID, "U_RESUMER"); err != nil {
		t.Fatal(err)
	}
	rep, err = svc.Run(ctx, ap.Replay.ID, "owner2")
	// Copies in doubt (no confirm before the connection closed) are never
	// sent again, so such a replay cannot finish: it stops, saying so.
	exact := rep.State == engine.StateFinished && rep.InDoubt == 0
	inDoubt := rep.State == engine.StateStopped && rep.InDoubt > 0 && rep.Sent+rep.InDoubt == 1000 && strings.Contains(rep.Note, "in doubt")
	if err != nil || !(exact || inDoubt) {
		t.Fatalf("resumed replay: %v, state %s, sent %d, in doubt %d: %s", err, rep.State, rep.Sent, rep.InDoubt, rep.Note)
	}
	after := check("after resuming")
	for mid, n := range after {
		if n != dups[mid] {
			t.Errorf("%s: %d extra copies after resuming, %d before: a recorded send was repeated", mid, n, dups[mid])
		}
	}
	if len(after) != len(dups) {
		t.Errorf("%d duplicates after resuming, %d before", len(after), len(dups))
	}
}

// newFaultEnv is an engine whose broker connection has a name of its own,
// so that a test can close exactly that connection (testkit.CloseConnections).
func newFaultEnv(t *testing.T) (*env, string) {
	t.Helper()
	connName := testkit.Name("conn")
	b, err := broker.New(broker.Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL, ConnectionName: connName})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := engine.New(fast, engine.Deps{Broker: b, Mover: b, Counters: b, Tokens: st.Tokens(), Ledger: st.Ledger(), Replays: st.Replays(), Leases: st.Leases(),
		Jobs: st.Jobs(), Registry: st.Workers()})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{rabbit: testkit.Dial(t), broker: b, store: st, svc: svc}
	return e, connName
}
