package integration_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
)

// TestAnOperationThatCannotBeRecordedDoesNotHappen: with the store's
// audit trail in Redis, the trail's stream is made unwritable (a string
// under its key) while the probe before an operation (Writable, which
// reads only the rate counter) still passes. A resume and a cancel of a
// paused replay are then refused unavailable and the replay stays paused,
// neither asked to run nor to stop; an approval of another preview is
// refused unavailable and leaves its token unused, no second replay, the
// DLQ as it was and nothing more sent. Once the trail takes entries again
// the resume runs, announced as begun before its outcome.
func TestAnOperationThatCannotBeRecordedDoesNotHappen(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{policy: apiPolicy(false), storeAudit: true, scanLimit: 100})
	ctx := context.Background()
	src, dlq := dlqWith(e, 20)
	var acked atomic.Int64
	e.rabbit.Consume(src, func(amqp091.Delivery) string { acked.Add(1); return "ack" })
	alice, bob := ops.SlackCaller("U0ALICE001"), ops.SlackCaller("U0BOB00001")
	p1, err := e.ops.Preview(ctx, alice, engine.Selection{DLQ: dlq})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := e.ops.Preview(ctx, bob, engine.Selection{DLQ: dlq})
	if err != nil {
		t.Fatal(err)
	}
	id := approvePaused(t, e, bob, p1.Token)
	var r engine.Replay
	testkit.Eventually(t, 30*time.Second, "the replay paused, its sends acked", func() bool {
		r, err = e.store.Replays().Get(ctx, id)
		return err == nil && r.State == engine.StatePaused && acked.Load() == int64(r.Sent)
	})
	inDLQ := e.rabbit.Count(dlq)

	trail := e.prefix + "audit"
	if err := e.rdb.Del(ctx, trail).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.Set(ctx, trail, "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Audit().Writable(ctx, "U0BOB00001"); err != nil {
		t.Fatalf("the probe before an operation fails (%v): the test needs it to pass", err)
	}
	for _, a := range []engine.ControlAction{engine.ControlResume, engine.ControlCancel} {
		if _, err := e.ops.Control(ctx, bob, a, id); code(err) != ops.Unavailable {
			t.Errorf("%s with an unwritable trail: %v, want refused unavailable", a, err)
		}
		if want, by, err := e.store.Replays().Desired(ctx, id); err != nil || want != engine.StatePaused {
			t.Errorf("after the unrecorded %s the replay is asked to be %q by %q (%v), want paused", a, want, by, err)
		}
	}
	if _, err := e.ops.Approve(ctx, alice, ops.Approval{Token: p2.Token}); code(err) != ops.Unavailable {
		t.Errorf("approval with an unwritable trail: %v, want refused unavailable", err)
	}
	if used, err := e.store.Tokens().UsedBy(ctx, p2.Token); err != nil || used != "" {
		t.Errorf("the unrecorded approval used its token: %q, %v", used, err)
	}
	if rs := e.replays(); len(rs) != 1 || rs[0].ID != id || rs[0].State != engine.StatePaused || rs[0].Sent != r.Sent {
		t.Errorf("replays after the unrecorded operations: %+v, want only %s, paused with %d sent", rs, id, r.Sent)
	}
	if n := e.rabbit.Count(dlq); n != inDLQ || acked.Load() != int64(r.Sent) {
		t.Errorf("the DLQ holds %d (was %d) and %d were delivered (sent %d)", n, inDLQ, acked.Load(), r.Sent)
	}

	if err := e.rdb.Del(ctx, trail).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.Control(ctx, bob, engine.ControlResume, id); err != nil {
		t.Fatalf("resume once the trail takes entries: %v", err)
	}
	es, err := e.store.Audit().List(ctx, audit.Filter{ReplayID: id, Op: audit.OpResume, Outcome: audit.OutcomeBegun})
	if err != nil || len(es) != 1 {
		t.Fatalf("begun resume entries %+v, %v", es, err)
	}
	es, err = e.store.Audit().List(ctx, audit.Filter{ReplayID: id})
	if err != nil || len(es) != 1 || es[0].Op != audit.OpResume || es[0].Outcome != audit.OutcomeOK {
		t.Errorf("the listing shows %+v (%v), want the resume's outcome alone, its begun entry concluded", es, err)
	}
}

func code(err error) ops.Code {
	if r, ok := ops.IsRefusal(err); ok {
		return r.Code
	}
	return ""
}
