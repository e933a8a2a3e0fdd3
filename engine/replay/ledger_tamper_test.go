package replay_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
)

// TestDeletedLedgerRecordStopsResume: a stopped replay whose ledger lost
// a window's record in Redis (its copies would read as never sent) is not
// run again: the resumed run fails with a bad signature and publishes
// nothing, and the DLQ keeps what the stopped replay left.
func TestDeletedLedgerRecordStopsResume(t *testing.T) {
	t.Parallel()
	e, rdb, prefix := newSignedEnv(t)
	r, svc := e.rabbit, e.svc
	ctx := context.Background()
	src, dlq := r.DeadLettered(6, 50)
	var delivered atomic.Int64
	r.Consume(src, func(amqp091.Delivery) string { delivered.Add(1); return "reject" }) // every copy comes back: it stops
	ap, err := replay.Approve(svc, ctx, preview(t, e, engine.Selection{DLQ: dlq}).Token, "U_APP",
		engine.Params{Step: 2, Cap: 2, Rate: -1, Timeout: 10 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	id := ap.Replay.ID
	rep, err := svc.Run(ctx, id, "w1")
	if err != nil || rep.State != engine.StateStopped {
		t.Fatalf("run: %v, %s: want stopped", err, rep.State)
	}
	r.WaitCount(dlq, 6, 20*time.Second)   // what it sent came back
	key := prefix + "{" + id + "}:ledger" // store/keys.go's layout
	if n, err := rdb.LLen(ctx, key).Result(); err != nil || n == 0 {
		t.Fatalf("the ledger holds %d records (%v)", n, err)
	}
	if err := rdb.LPop(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	before := delivered.Load()
	if _, err := svc.Control(ctx, id, engine.ControlResume, "U_RESUME"); err != nil && !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("resume: %v", err)
	}
	if rep, err := svc.Run(ctx, id, "w1"); !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("run of the replay whose ledger lost a record: %+v %v, want a bad signature", rep, err)
	}
	if n := r.Count(dlq); n != 6 {
		t.Fatalf("the DLQ holds %d, want all 6: nothing may be sent", n)
	}
	if n := delivered.Load(); n != before {
		t.Fatalf("%d copies delivered after the ledger was cut, want none", n-before)
	}
}
