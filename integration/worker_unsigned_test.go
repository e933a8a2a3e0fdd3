package integration_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
	"github.com/stroma/dlqbot/store"
)

// TestWorkerSkipsAnUnverifiableReplay: a process without the signing key
// writes an unsigned replay into the same Redis and hands it to the
// workers; the signing worker cannot verify it, so it neither runs nor
// rewrites it — the DLQ keeps its messages, the log has an Error line
// naming it — and the same worker goes on to run a replay it can verify
// to finished.
func TestWorkerSkipsAnUnverifiableReplay(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	e := newEnv(t, options{logs: logs, signingKey: []byte("integration-signing-key-0123456789abcdef")})
	ctx := context.Background()
	_, forged := dlqWith(e, 5)
	src, dlq := dlqWith(e, 5)
	e.rabbit.Consume(src, func(amqp091.Delivery) string { return "ack" })

	unsigned, err := store.New(store.Config{Prefix: e.prefix}, e.rdb, engine.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := amqp.New(amqp.Config{URL: testkit.Rabbit3.AMQPURL, ManagementURL: testkit.Rabbit3.ManagementURL, ReadMarks: unsigned.ReadMarks()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	other, err := replay.New(fast, replay.Deps{Broker: b, Mover: b, Counters: b, Watches: b, Tokens: unsigned.Tokens(), Ledger: unsigned.Ledger(),
		Replays: unsigned.Replays(), Leases: unsigned.Leases(), Schedule: unsigned.Schedule(), Jobs: unsigned.Jobs(), Registry: unsigned.Workers(), Claims: unsigned.Claims(), Consumers: testkit.ConsumersOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, TapGaps: testkit.TapOff{}})
	if err != nil {
		t.Fatal(err)
	}
	open, err := ops.New(ops.Config{}, ops.Deps{Engine: other, Tokens: unsigned.Tokens(), Replays: unsigned.Replays(), Windows: unsigned.Windows()})
	if err != nil {
		t.Fatal(err)
	}
	agent := ops.Caller{Identity: "mcp:agent", FrontEnd: ops.FrontMCP}
	p, err := open.Preview(ctx, agent, engine.Selection{DLQ: forged})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := open.Approve(ctx, agent, ops.Approval{Token: p.Token})
	if err != nil || bad.HandOffErr != nil {
		t.Fatalf("the unsigned approval: %v %v", err, bad.HandOffErr)
	}
	testkit.Eventually(t, 30*time.Second, "the worker's Error line", func() bool {
		return len(logs.lines(`"level":"error"`, bad.Replay.ID, "replay skipped")) > 0
	})

	alice, bob := ops.SlackCaller("U0ALICE001"), ops.SlackCaller("U0BOB00001")
	p2, err := e.ops.Preview(ctx, alice, engine.Selection{DLQ: dlq})
	if err != nil {
		t.Fatal(err)
	}
	good, err := e.ops.Approve(ctx, bob, ops.Approval{Token: p2.Token})
	if err != nil {
		t.Fatal(err)
	}
	var r engine.Replay
	testkit.Eventually(t, 60*time.Second, "the verifiable replay to end", func() bool {
		r, err = e.store.Replays().Get(ctx, good.Replay.ID)
		return err == nil && r.State.Terminal()
	})
	if r.State != engine.StateFinished {
		t.Fatalf("the verifiable replay: %s (%s)", r.State, r.Note)
	}
	if n := e.rabbit.Count(forged); n != 5 {
		t.Fatalf("the unverifiable replay's DLQ holds %d, want its 5", n)
	}
}
