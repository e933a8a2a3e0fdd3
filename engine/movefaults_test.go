package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestUnpacedReplayConnectionLostEnds closes the replaying engine's broker
// connection in the middle of an unpaced (rate=max) replay, while copies
// wait for their confirms. The run must return promptly (before: it spun
// forever on the closed bounce (basic.return) channel), with no copy called "nacked" —
// a confirm the closed channel left unanswered is in doubt — nothing
// lost, every duplicate in the ledger, and a resume must not send again
// anything the ledger lists.
func TestUnpacedReplayConnectionLostEnds(t *testing.T) {
	t.Parallel()
	const n = 5000
	e, connName := newFaultEnv(t)
	st, svc := e.store, e.svc
	r := e.rabbit
	src, dlq := r.DeadLettered(n, 200)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	testkit.Eventually(t, 20*time.Second, "the engine's connection in the management API", func() bool {
		return testkit.CountConnections(t, connName) > 0
	})
	rec := &recorder{}
	r.Consume(src, rec.handle)

	ctx := context.Background()
	ap, err := svc.Approve(ctx, p.Token, "U_APP", engine.Params{Step: n, Cap: n, Rate: -1, Timeout: 20 * time.Second}, true)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan engine.Replay, 1)
	go func() { rep, _ := svc.Run(ctx, ap.Replay.ID, "owner"); done <- rep }()
	testkit.Eventually(t, 30*time.Second, "500 delivered", func() bool { return len(rec.got()) >= 500 })
	if testkit.CloseConnections(t, connName) == 0 {
		t.Fatal("no connection of the replaying engine found to close")
	}
	var rep engine.Replay
	select {
	case rep = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the replay did not end within 60s of its connection closing")
	}
	if rep.State == engine.StateFinished {
		t.Fatal("the fault came too late: the replay finished")
	}
	for _, f := range rep.Failures {
		if f.Kind == engine.FailureNacked {
			t.Fatalf("copy %s called nacked after the channel closed: %s", f.ID, f.Detail)
		}
	}
	t.Logf("after the fault: state %s, sent %d, in doubt %d, duplicates %d: %s", rep.State, rep.Sent, rep.InDoubt, rep.Duplicates, rep.Note)

	check := func(stage string) map[string]int {
		t.Helper()
		testkit.Eventually(t, 30*time.Second, stage+": DLQ + target to account for every message", func() bool {
			return len(rec.got())+r.Count(dlq) >= n && r.Count(src) == 0
		})
		left := r.Drain(dlq, r.Count(dlq), 10*time.Second) // by count: a pause is no end
		originals := make([]string, n)
		for i := range originals {
			originals[i] = fmt.Sprintf("m-%d", i)
		}
		lost, dups := testkit.NoneLost(originals, ids(rec.got()), ids(left))
		if len(lost) > 0 {
			t.Fatalf("%s: %s", stage, testkit.Describe(lost, dups))
		}
		r.Publish(dlq, republish(left)...)
		r.WaitCount(dlq, len(left), 20*time.Second)
		return dups
	}
	dups := check("after the fault")
	entries, err := st.Ledger().Entries(ctx, ap.Replay.ID)
	if err != nil {
		t.Fatal(err)
	}
	byMsgID := map[string]string{}
	for _, m := range p.Messages {
		byMsgID[m.MessageID] = m.ID
	}
	inLedger := map[string]bool{}
	for _, en := range entries {
		inLedger[en.ID] = true
	}
	for mid := range dups {
		if !inLedger[byMsgID[mid]] {
			t.Errorf("duplicate %s is not in the ledger", mid)
		}
	}
	if _, err := svc.Resume(ctx, ap.Replay.ID, "U_RESUMER"); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if rep, err = svc.Run(rctx, ap.Replay.ID, "owner2"); err != nil {
		t.Fatalf("resumed replay: %v", err)
	}
	after := check("after resuming")
	for mid, k := range after {
		if k != dups[mid] {
			t.Errorf("%s: %d extra copies after resuming, %d before: a copy was sent again", mid, k, dups[mid])
		}
	}
	t.Logf("resumed: state %s, sent %d of %d, in doubt %d: %s", rep.State, rep.Sent, rep.Total, rep.InDoubt, rep.Note)
	if rep.InDoubt > 0 && rep.State == engine.StateFinished {
		t.Errorf("a replay with %d copies in doubt ended finished", rep.InDoubt)
	}
}
