package integration_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
)

const workerPolicy = `roles:
  - name: sre
    users: [U0ALICE001, U0BOB00001]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
approval:
  require_distinct_approver: true
`

// TestWorkerRefusesAReplayApprovedWithoutItsPolicy: a process with access
// control off (`dlqbot mcp` without DLQBOT_PERMISSIONS) writing into the
// same Redis previews and approves its own replay and hands it to the
// workers; the worker, enforcing its own policy (grants, four-eyes),
// refuses it before anything is sent: the replay ends stopped saying why,
// the DLQ keeps every message and the target receives none. A resume from
// that process is refused the same way. A replay approved through the
// policy by a second person runs to finished on the same worker. (Before,
// the worker sent it.)
func TestWorkerRefusesAReplayApprovedWithoutItsPolicy(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		workerRefuses(t, on)
	})
}

func workerRefuses(t *testing.T, on testkit.Broker) {
	e := newEnv(t, options{policy: workerPolicy, on: on})
	ctx := context.Background()
	src, dlq := dlqWith(e, 5)
	target := e.rabbit.Consume(src, func(amqp091.Delivery) string { return "ack" })
	received := func() int { n, _ := target.Counts(); return n }

	// The other process: its own engine on the same broker and store,
	// handing approved replays to the shared workers, and no policy.
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
	open, err := ops.New(ops.Config{}, ops.Deps{Engine: other, Tokens: st.Tokens(), Replays: st.Replays(), Windows: st.Windows()})
	if err != nil {
		t.Fatal(err)
	}
	agent := ops.Caller{Identity: "mcp:agent", FrontEnd: ops.FrontMCP}
	p, err := open.Preview(ctx, agent, engine.Selection{DLQ: dlq})
	if err != nil {
		t.Fatal(err)
	}
	out, err := open.Approve(ctx, agent, ops.Approval{Token: p.Token})
	if err != nil || out.HandOffErr != nil {
		t.Fatalf("approval without a policy: %v %v", err, out.HandOffErr)
	}
	id := out.Replay.ID
	stopped := func(what string) engine.Replay {
		var r engine.Replay
		testkit.Eventually(t, 30*time.Second, what, func() bool {
			r, err = st.Replays().Get(ctx, id)
			return err == nil && r.State == engine.StateStopped
		})
		return r
	}
	r := stopped("the worker's refusal")
	if r.Sent != 0 || !strings.Contains(r.Note, "refused by the worker's permissions policy") || !strings.Contains(r.Note, "mcp:agent") {
		t.Fatalf("refused replay: sent %d, note %q", r.Sent, r.Note)
	}
	if n := received(); n != 0 {
		t.Fatalf("the target received %d message(s)", n)
	}
	if n := e.rabbit.Count(dlq); n != 5 {
		t.Fatalf("the DLQ holds %d, want its 5", n)
	}

	// A resume from the open process: recorded, handed out, refused again.
	before := r.UpdatedAt
	if _, err := open.Control(ctx, agent, engine.ControlResume, id); err != nil {
		t.Fatalf("resume without a policy: %v", err)
	}
	testkit.Eventually(t, 30*time.Second, "the refused resume", func() bool {
		r, err = st.Replays().Get(ctx, id)
		return err == nil && r.State == engine.StateStopped && r.UpdatedAt.After(before)
	})
	if r.Sent != 0 || !strings.Contains(r.Note, "refused by the worker's permissions policy") {
		t.Fatalf("resumed replay: sent %d, note %q", r.Sent, r.Note)
	}
	if n := received(); n != 0 {
		t.Fatalf("after the resume the target received %d message(s)", n)
	}

	// Through the policy, by a second person, the same messages go (once
	// the refused replay, which still holds them, is cancelled).
	if _, err := e.ops.Control(ctx, ops.SlackCaller("U0BOB00001"), engine.ControlCancel, id); err != nil {
		t.Fatal(err)
	}
	p2, err := e.ops.Preview(ctx, ops.SlackCaller("U0ALICE001"), engine.Selection{DLQ: dlq})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.Approve(ctx, ops.SlackCaller("U0ALICE001"), ops.Approval{Token: p2.Token}); err == nil {
		t.Fatal("the requester approved her own preview")
	}
	ok, err := e.ops.Approve(ctx, ops.SlackCaller("U0BOB00001"), ops.Approval{Token: p2.Token})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "the allowed replay to end", func() bool {
		r, err = st.Replays().Get(ctx, ok.Replay.ID)
		return err == nil && r.State.Terminal()
	})
	if r.State != engine.StateFinished || received() != 5 {
		t.Fatalf("the allowed replay: %s (%s), the target received %d", r.State, r.Note, received())
	}
}
