package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestPreviewOnlyInAllowedChannels: a DLQ with a channel rule is previewed
// in its channel; asked for elsewhere, the preview is refused ephemerally
// naming the allowed channel, and the DLQ is not read.
func TestPreviewOnlyInAllowedChannels(t *testing.T) {
	t.Parallel()
	policy, err := commands.ParsePolicy([]byte(`
roles:
  - name: sre
    users: [U_REQ]
    grants:
      - queues: ["*"]
        actions: [read]
channels:
  - queues: ["payments.*"]
    allow: [C_PAY]
`))
	if err != nil {
		t.Fatal(err)
	}
	h := newPolicyHarness(t, nil, nil, policy)
	if _, err := h.stub.SlashCommand(h.srv.URL, "/dlq", "preview payments.dlq", "U_REQ", "C_OPS"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "a refusal", func() bool { return len(h.stub.Ephemerals("U_REQ")) == 1 })
	if got := h.stub.Ephemerals("U_REQ")[0].Text; !strings.Contains(got, "`C_PAY`") || !strings.Contains(got, "nothing was read") {
		t.Fatalf("refusal %q", got)
	}
	if n := h.eng.calls.Load(); n != 0 || len(h.stub.Messages("C_OPS")) != 0 {
		t.Fatalf("engine called %d times, %d posts in C_OPS", n, len(h.stub.Messages("C_OPS")))
	}
	for ch, dlq := range map[string]string{"C_PAY": "payments.dlq", "C_OPS": "orders.dlq"} {
		if _, err := h.stub.SlashCommand(h.srv.URL, "/dlq", "preview "+dlq, "U_REQ", ch); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, "the preview of "+dlq+" in "+ch, func() bool { return len(h.stub.Messages(ch)) == 1 })
	}
}

// TestReplayShownOnlyInAllowedChannels: `replay <token>` typed in a
// channel the policy does not allow for the DLQ posts nothing there: the
// progress goes to the activity channel when the policy allows that, and
// the approver is told where, privately; when neither is allowed, no
// channel shows the replay.
func TestReplayShownOnlyInAllowedChannels(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, allow, want string
	}{
		{"activity allowed", "[C_OPS, C_ACTIVITY]", "C_ACTIVITY"},
		{"activity not allowed", "[C_OPS]", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := ordersAllowedIn(t, c.allow)
			if _, err := h.stub.SlashCommand(h.srv.URL, "/dlq", "replay p_fake", "U_APP", "C_ELSEWHERE"); err != nil {
				t.Fatal(err)
			}
			testkit.Eventually(t, 10*time.Second, "the approver told where", func() bool {
				for _, e := range h.stub.Ephemerals("U_APP") {
					if strings.Contains(e.Text, "r_fake") {
						return true
					}
				}
				return false
			})
			var told string
			for _, e := range h.stub.Ephemerals("U_APP") {
				told += e.Text + "\n"
			}
			if c.want != "" && !strings.Contains(told, "<#"+c.want+">") {
				t.Fatalf("the approver is not given a link to %s: %q", c.want, told)
			}
			if n := len(h.stub.Messages("C_ELSEWHERE")); n != 0 {
				t.Fatalf("%d posts in the channel the policy does not allow", n)
			}
			if c.want != "" {
				testkit.Eventually(t, 10*time.Second, "the progress in "+c.want, func() bool { return len(h.stub.Messages(c.want)) == 1 })
				if ref := h.store.Refs("r_fake"); ref[0] != c.want {
					t.Fatalf("the replay is recorded as shown in %q", ref[0])
				}
			} else if ref := h.store.Refs("r_fake"); ref[0] != "" || len(h.stub.Messages("C_ACTIVITY")) != 0 {
				t.Fatalf("shown in %q; %d posts in the activity channel", ref[0], len(h.stub.Messages("C_ACTIVITY")))
			}
		})
	}
}

// TestAPIApprovalShownOnlyInAllowedChannels: a replay approved through
// the API, of a DLQ the policy does not allow in the API channel, is
// threaded in the activity channel, which it allows, never in the API
// channel.
func TestAPIApprovalShownOnlyInAllowedChannels(t *testing.T) {
	t.Parallel()
	policy, err := commands.ParsePolicy([]byte(`
roles:
  - name: sre
    users: [U_REQ]
    grants:
      - queues: ["*"]
        actions: [read]
channels:
  - queues: ["orders.*"]
    allow: [C_OPS, C_ACTIVITY]
`))
	if err != nil {
		t.Fatal(err)
	}
	h := newPolicyHarness(t, nil, func(c *bot.Config) { c.APIChannel = "C_API" }, policy)
	r := engine.Replay{ID: "r_api", Token: "p_api", DLQ: "orders.dlq", Approver: "api:runbook", Requester: "api:runbook", Total: 3}
	if err := h.bot.ShowReplay(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if n := len(h.stub.Messages("C_API")); n != 0 {
		t.Fatalf("%d posts in the API channel the policy does not allow for orders.dlq", n)
	}
	if ms := h.stub.Messages("C_ACTIVITY"); len(ms) != 1 || h.store.Refs("r_api")[0] != "C_ACTIVITY" {
		t.Fatalf("%d posts in the activity channel; shown in %q", len(ms), h.store.Refs("r_api")[0])
	}
}

// TestActivityLinesOnlyWhereTheDLQIsAllowed: a replay of a DLQ the policy
// allows in its own channel but not in the activity channel runs to its
// end, is checked and parked: its thread and its channel get every line,
// and the activity channel gets no post and no edit at all. The same
// replay of a DLQ allowed in both gets its activity lines.
func TestActivityLinesOnlyWhereTheDLQIsAllowed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, allow string
		lines       bool
	}{
		{"activity allowed", "[C_OPS, C_ACTIVITY]", true},
		{"activity not allowed", "[C_OPS]", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := ordersAllowedIn(t, c.allow)
			preview := h.previewQueued(t)
			ctx := context.Background()
			h.bot.Notify(ctx, event("r_fake", engine.EventStarted, engine.StateRunning, 0, nil))
			h.bot.Notify(ctx, event("r_fake", engine.EventStepPassed, engine.StateRunning, 10,
				&engine.StepResult{Step: 1, Planned: 10, Sent: 10, Settled: 10, Observation: "left the target queue"}))
			fin := event("r_fake", engine.EventFinished, engine.StateFinished, 100, nil)
			h.bot.Notify(ctx, fin)
			h.bot.Notify(ctx, engine.Event{Kind: engine.EventFollowUp, Replay: fin.Replay, At: time.Now(),
				Check: &engine.CheckReport{ReplayID: "r_fake", DLQ: "orders.dlq", Replayed: 100, Returned: 2, Label: "+5m",
					Groups: []engine.CheckGroup{{Group: "timeout", Type: "Timeout", Count: 2}}}})
			h.bot.Notify(ctx, engine.Event{Kind: engine.EventParked, Replay: fin.Replay, Actor: "U_APP", At: time.Now(),
				Text: "2 message(s) of replay r_fake moved from orders.dlq to orders.dlq.parking"})
			// A last reply in the thread: the replay's posts go out in order,
			// so once it is there every line before it was posted or left out.
			h.bot.Notify(ctx, engine.Event{Kind: engine.EventParked, Replay: fin.Replay, At: time.Now(), Text: "last of r_fake"})
			testkit.Eventually(t, 10*time.Second, "the last reply in the thread", func() bool {
				p, _ := h.stub.Message("C_OPS", preview.TS)
				for _, r := range p.Replies {
					if strings.Contains(r.Content(), "last of r_fake") {
						return true
					}
				}
				return false
			})
			p, _ := h.stub.Message("C_OPS", preview.TS)
			var thread string
			for _, r := range p.Replies {
				thread += r.Content() + "\n"
			}
			for _, want := range []string{"Did replay", ":parking: 2 message(s)"} {
				if !strings.Contains(thread, want) {
					t.Errorf("the thread lacks %q: %s", want, thread)
				}
			}
			if n := len(h.stub.Messages("C_OPS")); n != 2 {
				t.Errorf("%d top-level messages in C_OPS, want the preview and the outcome line", n)
			}
			if c.lines {
				testkit.Eventually(t, 10*time.Second, "the activity lines of started, finished, the check and the parking", func() bool {
					n := 0
					for _, m := range h.stub.Messages("C_ACTIVITY") {
						if strings.Contains(m.Content(), "orders.dlq") {
							n++
						}
					}
					return n >= 4
				})
				return
			}
			for _, method := range []string{"chat.postMessage", "chat.update"} {
				for _, call := range h.stub.Calls(method) {
					if call.Args.Get("channel") == "C_ACTIVITY" {
						t.Errorf("%s in the activity channel, which the policy does not allow for orders.dlq: %s %s",
							method, call.Args.Get("text"), call.Args.Get("blocks"))
					}
				}
			}
		})
	}
}

// ordersAllowedIn returns a bot whose policy lets U_REQ and U_APP read,
// replay and publish everywhere and shows orders.* only in the channels
// allow lists (YAML, like "[C_OPS]").
func ordersAllowedIn(t *testing.T, allow string) *harness {
	t.Helper()
	policy, err := commands.ParsePolicy([]byte(`
roles:
  - name: sre
    users: [U_REQ, U_APP]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
channels:
  - queues: ["orders.*"]
    allow: ` + allow + `
`))
	if err != nil {
		t.Fatal(err)
	}
	return newPolicyHarness(t, nil, nil, policy)
}
