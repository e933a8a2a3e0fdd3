package integration_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
)

// humanWorkerPolicy: bot is an automation principal (a token, no
// as_user), alice a person's token (her Slack user).
var humanWorkerPolicy = `principals:
  - name: bot
    token_sha256: ` + commands.HashToken("bot-token") + `
  - name: alice
    token_sha256: ` + commands.HashToken("alice-token") + `
    as_user: U0ALICE001
roles:
  - name: sre
    users: [U0ALICE001]
    principals: [bot]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
`

// TestWorkerRequiresAHumanApprover: a process with the same policy but
// without DLQBOT_MCP_REQUIRE_HUMAN approves a replay as the automation
// principal bot and hands it to the workers; the worker, with
// RequireHuman on, refuses it before anything is sent: the replay ends
// stopped naming api:bot, the activity channel says so, the DLQ holds
// every message and the target none (read from the broker). The same
// process's approval by alice (a person's token, on the dashboard) runs
// to finished on the same worker.
func TestWorkerRequiresAHumanApprover(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		workerRequiresHuman(t, on)
	})
}

func workerRequiresHuman(t *testing.T, on testkit.Broker) {
	e := newEnv(t, options{policy: humanWorkerPolicy, requireHuman: true, on: on})
	ctx := context.Background()
	src, dlq := dlqWith(e, 5)

	// The other process: its own engine and ops on the same broker and
	// store, the same policy, and RequireHuman off.
	b, err := amqp.New(amqp.Config{URL: on.AMQPURL, ManagementURL: on.ManagementURL, ReadMarks: e.store.ReadMarks()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	st := e.store
	other, err := replay.New(fast, replay.Deps{Broker: b, Mover: b, Counters: b, Watches: b, Tokens: st.Tokens(), Ledger: st.Ledger(),
		Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(), Jobs: st.Jobs(), Registry: st.Workers(), Claims: st.Claims(), Consumers: testkit.ConsumersOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, TapGaps: testkit.TapOff{}})
	if err != nil {
		t.Fatal(err)
	}
	lax, err := ops.New(ops.Config{Policy: e.ops.Policy()}, ops.Deps{Engine: other, Tokens: st.Tokens(), Replays: st.Replays(), Windows: st.Windows()})
	if err != nil {
		t.Fatal(err)
	}
	pol := e.ops.Policy()
	bot, _ := pol.Principal("bot-token")
	alice, _ := pol.Principal("alice-token")
	botAPI := ops.PrincipalCaller(bot, ops.FrontAPI)

	p, err := lax.Preview(ctx, botAPI, engine.Selection{DLQ: dlq})
	if err != nil {
		t.Fatal(err)
	}
	out, err := lax.Approve(ctx, botAPI, ops.Approval{Token: p.Token})
	if err != nil || out.HandOffErr != nil {
		t.Fatalf("approval without RequireHuman: %v %v", err, out.HandOffErr)
	}
	id := out.Replay.ID
	var r engine.Replay
	testkit.Eventually(t, 30*time.Second, "the worker's answer", func() bool {
		r, err = st.Replays().Get(ctx, id)
		return err == nil && (r.State.Terminal() || r.State == engine.StateStopped || r.Sent > 0)
	})
	if r.State != engine.StateStopped || r.Sent != 0 || !strings.Contains(r.Note, "refused by the worker's permissions policy") ||
		!strings.Contains(r.Note, "api:bot") {
		t.Fatalf("approved by an automation principal: %s, sent %d, note %q", r.State, r.Sent, r.Note)
	}
	if n := e.rabbit.Count(src); n != 0 {
		t.Fatalf("the target holds %d message(s)", n)
	}
	if n := e.rabbit.Count(dlq); n != 5 {
		t.Fatalf("the DLQ holds %d, want its 5", n)
	}
	testkit.Eventually(t, 10*time.Second, "the refusal in the activity channel", func() bool {
		for _, l := range e.activityLines() {
			if strings.Contains(l, id) && strings.Contains(l, "refused by the worker") {
				return true
			}
		}
		return false
	})

	// The same messages approved by a person's token: they go.
	if _, err := e.ops.Control(ctx, ops.SlackCaller("U0ALICE001"), engine.ControlCancel, id); err != nil {
		t.Fatal(err)
	}
	target := e.rabbit.Consume(src, func(amqp091.Delivery) string { return "ack" })
	p2, err := lax.Preview(ctx, botAPI, engine.Selection{DLQ: dlq})
	if err != nil {
		t.Fatal(err)
	}
	ok, err := lax.Approve(ctx, ops.PrincipalCaller(alice, ops.FrontDashboard), ops.Approval{Token: p2.Token})
	if err != nil || ok.HandOffErr != nil {
		t.Fatalf("alice's approval: %v %v", err, ok.HandOffErr)
	}
	testkit.Eventually(t, 60*time.Second, "alice's replay to end", func() bool {
		r, err = st.Replays().Get(ctx, ok.Replay.ID)
		return err == nil && r.State.Terminal()
	})
	if n, _ := target.Counts(); r.State != engine.StateFinished || n != 5 {
		t.Fatalf("approved by alice: %s (%s), the target received %d", r.State, r.Note, n)
	}
}
