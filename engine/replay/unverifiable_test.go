package replay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// TestWorkerSkipsAnUnverifiableReplay: of two approved replays on a
// signing store, one whose record was edited in Redis before a worker took
// it is refused (a bad signature; its DLQ keeps every message) and the
// other runs to finished on the same worker; the list shows both, the
// edited one marked unverifiable.
func TestWorkerSkipsAnUnverifiableReplay(t *testing.T) {
	t.Parallel()
	e, rdb, prefix := newSignedEnv(t)
	st, svc, r := e.store, e.svc, e.rabbit
	ctx := context.Background()
	srcA, dlqA := r.DeadLettered(3, 50)
	srcB, dlqB := r.DeadLettered(3, 50)
	r.Consume(srcA, func(amqp091.Delivery) string { return "ack" })
	r.Consume(srcB, func(amqp091.Delivery) string { return "ack" })

	apA, err := replay.Approve(svc, ctx, preview(t, e, engine.Selection{DLQ: dlqA}).Token, "U_APP", oneStep, false)
	if err != nil {
		t.Fatal(err)
	}
	key := prefix + "{" + apA.Replay.ID + "}:replay" // store/keys.go's layout
	raw, err := rdb.HGet(ctx, key, "data").Result()
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(raw, `"approver":"U_APP"`, `"approver":"U_ELSE"`, 1)
	if edited == raw {
		t.Fatalf("the record does not name its approver: %s", raw)
	}
	if err := rdb.HSet(ctx, key, "data", edited).Err(); err != nil {
		t.Fatal(err)
	}
	apB, err := replay.Approve(svc, ctx, preview(t, e, engine.Selection{DLQ: dlqB}).Token, "U_APP", oneStep, false)
	if err != nil {
		t.Fatal(err)
	}

	for _, id := range []string{apA.Replay.ID, apB.Replay.ID} {
		if err := svc.Enqueue(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Work(wctx, engine.WorkerConfig{ID: "w1", Block: 50 * time.Millisecond}) }()
	testkit.Eventually(t, 60*time.Second, "the verifiable replay to finish", func() bool {
		cur, err := svc.Status(ctx, apB.Replay.ID)
		return err == nil && cur.State == engine.StateFinished
	})
	testkit.Eventually(t, 10*time.Second, "the worker to take both jobs", func() bool {
		n, err := st.Jobs().Pending(ctx)
		return err == nil && n == 0
	})
	stop()
	<-done
	if _, err := svc.Status(ctx, apA.Replay.ID); !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("the edited replay: %v, want a bad signature", err)
	}
	if n := r.Count(dlqA); n != 3 {
		t.Fatalf("the edited replay's DLQ holds %d, want all 3: nothing may be sent for it", n)
	}
	if n := r.Count(dlqB); n != 0 {
		t.Fatalf("the finished replay's DLQ holds %d, want 0", n)
	}
	list, err := st.Replays().List(ctx, 0)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v, want both", list, err)
	}
	for _, x := range list {
		if (x.ID == apA.Replay.ID) != x.Unverifiable {
			t.Errorf("listed %s unverifiable=%v", x.ID, x.Unverifiable)
		}
	}
}

// newSignedEnv is newEnv on a store that signs its records, with the
// Redis client and prefix for a test to edit them as an attacker would.
func newSignedEnv(t *testing.T) (*env, redis.UniversalClient, string) {
	t.Helper()
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix, SigningKey: []byte("engine-test-signing-key-0123456789abcdef")}, rdb, engine.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	on := testkit.Rabbit3
	b, err := amqp.New(amqp.Config{URL: on.AMQPURL, ManagementURL: on.ManagementURL, ReadMarks: st.ReadMarks()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	svc, err := replay.New(fast, replay.Deps{Broker: b, Mover: b, Counters: b, Watches: b, Tokens: st.Tokens(), Ledger: st.Ledger(),
		Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(), Taps: b, Returns: st.Returns(), Jobs: st.Jobs(), Registry: st.Workers(),
		Claims: st.Claims(), TapGaps: st.TapGaps(), Consumers: testkit.ConsumersOff{}})
	if err != nil {
		t.Fatal(err)
	}
	return &env{rabbit: on.Dial(t), broker: b, store: st, svc: svc}, rdb, prefix
}

// TestRolledBackRecordCannotBeResumed: the saved record of a stopped
// replay, written back after a cancel was accepted, with the pending
// cancel deleted, is refused: the resume fails with a bad signature, a run
// of the replay too, and the DLQ keeps what the stopped replay left.
func TestRolledBackRecordCannotBeResumed(t *testing.T) {
	t.Parallel()
	e, rdb, prefix := newSignedEnv(t)
	r, svc := e.rabbit, e.svc
	ctx := context.Background()
	src, dlq := r.DeadLettered(6, 50)
	r.Consume(src, func(amqp091.Delivery) string { return "reject" }) // every copy comes back: it stops
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
	key := prefix + "{" + id + "}:replay" // store/keys.go's layout
	saved, err := rdb.HGet(ctx, key, "data").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := svc.Control(ctx, id, engine.ControlCancel, "U_CANCEL"); err != nil || got.State != engine.StateCancelled {
		t.Fatalf("cancel: %+v %v", got, err)
	}
	r.WaitCount(dlq, 6, 20*time.Second) // what it sent came back
	if err := rdb.HSet(ctx, key, "data", saved).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HDel(ctx, key, "desired", "desired_by").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Control(ctx, id, engine.ControlResume, "U_RESUME"); !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("resume of the written-back record: %v, want a bad signature", err)
	}
	if rep, err := svc.Run(ctx, id, "w1"); !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("run of the written-back record: %+v %v, want a bad signature", rep, err)
	}
	if n := r.Count(dlq); n != 6 {
		t.Fatalf("the DLQ holds %d, want all 6: nothing may be sent", n)
	}
}
