package integration_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
)

// dlqWith declares a source queue and its DLQ and dead-letters n messages.
func dlqWith(e *env, n int) (src, dlq string) {
	src, dlq = testkit.Name("src"), testkit.Name("dlq")
	e.rabbit.Topology(src, dlq, nil)
	e.rabbit.Reject(src, testkit.Msgs(n, 200)...)
	e.rabbit.WaitCount(dlq, n, 20*time.Second)
	return src, dlq
}

func TestPreviewApproveAndFinish(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	src, dlq := dlqWith(e, 30)
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })

	ack := e.command("U0REQUEST1", "preview "+dlq)
	if !strings.Contains(ack, "Previewing") {
		t.Fatalf("ack %q", ack)
	}
	preview, token := e.waitPreview(1)
	if buttonValue(preview.RawBlocks, blocks.ActionDiscard) != token || !strings.HasPrefix(token, "p_") {
		t.Fatalf("preview buttons: approve %q discard %q", token, buttonValue(preview.RawBlocks, blocks.ActionDiscard))
	}
	if n := e.rabbit.Count(dlq); n != 30 {
		t.Fatalf("the preview changed the DLQ: %d messages, want 30", n)
	}
	// 30 messages do not fit in the samples: the full list goes to the
	// requester's direct message, never to the channel.
	testkit.Eventually(t, 10*time.Second, "the message list file", func() bool { return len(e.stub.Files()) == 1 })
	f := e.stub.Files()[0]
	if f.Channel != slackstub.DMChannel("U0REQUEST1") || f.ThreadTS != "" || strings.Count(string(f.Content), "\n") != 31 {
		t.Fatalf("file in %s thread %q with %d lines, want the requester's DM and 31 lines", f.Channel, f.ThreadTS, strings.Count(string(f.Content), "\n"))
	}
	if eph := e.waitEphemeral("U0REQUEST1", 1); !strings.Contains(eph.Text, "Sample messages") {
		t.Fatalf("the requester's first ephemeral reply: %q", eph.Text)
	}

	e.click("U0APPROVE1", blocks.ActionApprove, token, preview.TS)
	testkit.Eventually(t, 20*time.Second, "the preview to show its approver", func() bool {
		return strings.Contains(e.thread(preview.TS).Content(), "Approved by <@U0APPROVE1>")
	})
	if buttonValue(e.thread(preview.TS).RawBlocks, blocks.ActionApprove) != "" {
		t.Fatal("the approved preview still has its Approve button")
	}
	prog := e.waitProgress(preview.TS, "Finished", 60*time.Second)
	assertEditsSpaced(t, prog)
	if prog.Edits() < 2 {
		t.Errorf("progress message edited %d times, want one per step at least", prog.Edits())
	}
	testkit.Eventually(t, 10*time.Second, "the finished reply", func() bool { return contains(e.replies(preview.TS), "Finished") })
	rs := e.replies(preview.TS)
	for _, want := range []string{"Replay started", "Step 1 passed", "Step 2 passed", "Finished clean*: 30 sent"} {
		if !contains(rs, want) {
			t.Errorf("thread replies %q lack %q", rs, want)
		}
	}
	testkit.Eventually(t, 10*time.Second, "two activity lines", func() bool { return len(e.activityLines()) == 2 })
	act := e.activityLines()
	if !strings.Contains(act[0], "started") || !strings.Contains(act[1], "finished") || !strings.Contains(act[1], "approved by <@U0APPROVE1>") {
		t.Fatalf("activity %q", act)
	}
	r := e.replays()[0]
	if r.State != engine.StateFinished || r.Sent != 30 {
		t.Fatalf("replay %+v", r)
	}
	// Where it shows is the bot's own record, not the engine's.
	if ch, thread, progress, err := e.store.SlackRefs().Get(e.ctx, r.ID); err != nil || ch != channel || thread != preview.TS || progress != prog.TS {
		t.Fatalf("slack refs %s %s %s (%v), want %s %s %s", ch, thread, progress, err, channel, preview.TS, prog.TS)
	}
	if n := e.rabbit.Count(dlq); n != 0 {
		t.Fatalf("%d messages left in the DLQ", n)
	}
}

func TestRejectingConsumerStopsThenCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	src, dlq := dlqWith(e, 20)
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "reject" })
	e.command("U0REQUEST1", "preview "+dlq)
	preview, token := e.waitPreview(1)
	e.click("U0APPROVE1", blocks.ActionApprove, token, preview.TS)
	prog := e.waitProgress(preview.TS, "Stopped", 60*time.Second)
	id := buttonValue(prog.RawBlocks, blocks.ActionCancel)
	if id == "" || buttonValue(prog.RawBlocks, blocks.ActionResume) != id {
		t.Fatalf("stopped progress lacks Continue anyway / Cancel: %s", prog.RawBlocks)
	}
	testkit.Eventually(t, 10*time.Second, "the stop reply and line", func() bool {
		return contains(e.replies(preview.TS), "Stopped after step 1") && contains(e.activityLines(), "stopped")
	})
	e.rabbit.WaitCount(dlq, 20, 20*time.Second) // 10 came back, 10 never sent

	// Did it work? And where is it? Answers go to the asker alone.
	e.command("U0REQUEST1", "check "+id)
	if got := e.waitEphemeral("U0REQUEST1", 2); !strings.Contains(got.Text, "10 of 10 sent came back") {
		t.Fatalf("check: %q", got.Text)
	}
	e.command("U0REQUEST1", "status "+id)
	if got := e.waitEphemeral("U0REQUEST1", 3); !strings.Contains(got.Text, "stopped") {
		t.Fatalf("status: %q", got.Text)
	}
	e.command("U0REQUEST1", "status")
	if got := e.waitEphemeral("U0REQUEST1", 4); !strings.Contains(got.Text, id) {
		t.Fatalf("list: %q", got.Text)
	}
	e.command("U0REQUEST1", "pause "+id)
	if got := e.waitEphemeral("U0REQUEST1", 5); !strings.Contains(got.Text, "is stopped, so it cannot be paused") {
		t.Fatalf("pause of a stopped replay: %q", got.Text)
	}

	e.click("U0APPROVE1", blocks.ActionCancel, id, prog.TS)
	e.waitProgress(preview.TS, "Cancelled", 20*time.Second)
	testkit.Eventually(t, 10*time.Second, "the cancel line", func() bool { return contains(e.activityLines(), "cancelled") })
	if r := e.replays()[0]; r.State != engine.StateCancelled {
		t.Fatalf("replay %s, want cancelled", r.State)
	}
	if p, _ := e.progress(preview.TS); buttonValue(p.RawBlocks, blocks.ActionResume) != "" {
		t.Fatal("a cancelled replay still offers Resume")
	}
}

const policyYAML = `
roles:
  - name: sre
    users: [U0OKAYED01]
    usergroups: [S0SRE]
    grants:
      - queues: ["t-*"]
        actions: [read, replay, publish]
approval:
  require_distinct_approver: true
`

func TestPermissionsAreCheckedForTheClicker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{policy: policyYAML})
	e.stub.SetUserGroups(map[string][]string{"S0SRE": {"U0GROUPED1"}, "S0OTHER": {"U0NOPERM01"}})
	src, dlq := dlqWith(e, 5)
	if ack := e.command("U0NOPERM01", "help"); !strings.Contains(ack, "Access control is on") {
		t.Fatalf("help: %s", ack)
	}
	e.command("U0NOPERM01", "preview "+dlq)
	if got := e.waitEphemeral("U0NOPERM01", 1); !strings.Contains(got.Text, "You need `read`") {
		t.Fatalf("refusal %q", got.Text)
	}
	e.command("U0OKAYED01", "preview "+dlq)
	preview, token := e.waitPreview(1)
	if got := e.waitEphemeral("U0OKAYED01", 1); !strings.Contains(got.Text, "Sample messages") {
		t.Fatalf("the requester's samples: %q", got.Text)
	}

	e.click("U0NOPERM01", blocks.ActionApprove, token, preview.TS)
	if got := e.waitEphemeral("U0NOPERM01", 2); !strings.Contains(got.Text, "You need `replay`") || !strings.Contains(got.Text, "`publish`") {
		t.Fatalf("refusal %q", got.Text)
	}
	e.click("U0OKAYED01", blocks.ActionApprove, token, preview.TS)
	if got := e.waitEphemeral("U0OKAYED01", 2); !strings.Contains(got.Text, "someone else has to approve") {
		t.Fatalf("refusal %q", got.Text)
	}
	// Nothing moved: the DLQ is whole, no replay exists, the token is unused.
	if n := e.rabbit.Count(dlq); n != 5 {
		t.Fatalf("DLQ holds %d, want 5", n)
	}
	if rs := e.replays(); len(rs) != 0 {
		t.Fatalf("%d replays created by refused approvals", len(rs))
	}
	if by, err := e.store.Tokens().UsedBy(context.Background(), token); err != nil || by != "" {
		t.Fatalf("token used by %q (%v), want unused", by, err)
	}
	m := e.thread(preview.TS)
	if m.Edits() != 0 {
		t.Fatalf("preview edited %d times after refusals", m.Edits())
	}
	for _, r := range m.Replies {
		if len(r.Files) == 0 { // the only reply is the attached message list
			t.Fatalf("a reply in the preview's thread after refusals: %q", r.Content())
		}
	}
	for _, l := range e.activityLines() {
		t.Fatalf("a refusal reached the activity channel: %q", l)
	}

	// A member of the user group S0SRE may approve.
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })
	e.click("U0GROUPED1", blocks.ActionApprove, token, preview.TS)
	e.waitProgress(preview.TS, "Finished", 60*time.Second)
	if calls := e.stub.Calls("usergroups.list"); len(calls) == 0 || calls[0].Args.Get("include_users") != "true" {
		t.Fatalf("usergroups.list calls %+v", calls)
	}
}
