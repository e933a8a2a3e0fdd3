package integration_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/mcp"
)

// A person named in the exception texts of kycDLQ's messages.
const (
	kycName  = "John Roe"
	kycEmail = "john.roe@example.com"
)

// kycDLQ publishes Spring-style failures of two types whose exception
// texts name a person: 2 KycException, 2 IllegalStateException.
func kycDLQ(e *env) (src, dlq string) {
	src, dlq = testkit.Name("src"), testkit.Name("dlq")
	e.rabbit.Topology(src, dlq, nil)
	var msgs []amqp.Publishing
	for i := range 4 {
		exc := "com.acme.KycException: KYC failed for customer " + kycName + ", email " + kycEmail + ", diagnosis suspected fraud"
		if i%2 == 1 {
			exc = "java.lang.IllegalStateException: ledger of " + kycName + " (" + kycEmail + ") is closed"
		}
		msgs = append(msgs, testkit.Msg("kyc-"+strconv.Itoa(i), []byte(`{"n":`+strconv.Itoa(i)+`}`), amqp.Table{
			"x-original-exchange": "", "x-original-routingKey": src,
			"x-exception-stacktrace": exc + "\n\tat com.acme.Kyc.check(Kyc.java:42)",
		}))
	}
	e.rabbit.Publish(dlq, msgs...)
	e.rabbit.WaitCount(dlq, 4, 20*time.Second)
	return src, dlq
}

// channelVisible is everything the stand-in recorded that a whole
// channel sees: every post, edit and file outside direct messages (not
// ephemeral replies), as JSON.
func channelVisible(t *testing.T, e *env) string {
	t.Helper()
	var b strings.Builder
	for _, c := range e.stub.Calls("") {
		if c.Method == "chat.postEphemeral" {
			continue
		}
		ch := c.Args.Get("channel") + c.Args.Get("channel_id")
		if strings.HasPrefix(ch, "D") {
			continue
		}
		raw, _ := json.Marshal(c)
		b.Write(raw)
		b.WriteByte('\n')
	}
	for _, f := range e.stub.Files() {
		if !strings.HasPrefix(f.Channel, "D") {
			b.Write(f.Content)
		}
	}
	return b.String()
}

// TestExceptionTextStaysPrivate: a DLQ whose exceptions name a person
// and an e-mail address, through preview, approval, copies coming back
// (a consumer that rejects), `check`, a follow-up and an agent's request
// for a person's approval (posted in the API channel): nothing a channel
// sees — posts, edits, thread replies, activity lines, files — holds the
// name or the address; the channel names each failure by its type; the
// requester's private replies (samples, check) show the texts.
func TestExceptionTextStaysPrivate(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, options{policy: apiPolicy(false), followUps: []time.Duration{time.Millisecond}}, mcp.Config{RequireHuman: true})
	src, dlq := kycDLQ(e.env)
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "reject" })

	e.command("U0ALICE001", "preview "+dlq)
	post, token := e.waitPreview(1)
	for _, typ := range []string{"com.acme.KycException", "java.lang.IllegalStateException"} {
		if !strings.Contains(post.Content(), typ) {
			t.Errorf("the preview does not name the failure type %s: %q", typ, post.Content())
		}
	}
	samples := e.waitEphemeral("U0ALICE001", 1)
	sraw, _ := json.Marshal(samples)
	if !strings.Contains(string(sraw), kycName) || !strings.Contains(string(sraw), kycEmail) {
		t.Fatalf("the requester's private samples do not show the exception text: %s", sraw)
	}

	e.click("U0BOB00001", blocks.ActionApprove, token, post.TS)
	var r engine.Replay
	testkit.Eventually(t, 90*time.Second, "the replay to end with copies back", func() bool {
		rs := e.replays()
		if len(rs) != 1 {
			return false
		}
		r = rs[0]
		return r.Returned > 0 && (r.State.Terminal() || r.State == engine.StateStopped)
	})
	var followUp string
	testkit.Eventually(t, 30*time.Second, "a follow-up in the replay's thread", func() bool {
		for _, m := range e.thread(post.TS).Replies {
			if strings.Contains(m.Content(), "follow-up +") && strings.Contains(m.Content(), "came back") {
				followUp = m.Content()
				return true
			}
		}
		return false
	})

	if !strings.Contains(followUp, "Exception`") {
		t.Errorf("the follow-up does not name the returned copies' failure by its type: %q", followUp)
	}

	n := len(e.stub.Ephemerals("U0ALICE001"))
	e.command("U0ALICE001", "check "+r.ID)
	check := e.waitEphemeral("U0ALICE001", n+1)
	craw, _ := json.Marshal(check)
	if !strings.Contains(string(craw), kycName) {
		t.Fatalf("the requester's check does not show the failure's text: %s", craw)
	}

	// An agent that needs a person: its preview is posted for approval
	// in the API channel.
	ct, st := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		_ = mcp.Serve(ctx, e.api, mcp.Config{RequireHuman: true}, api.Caller{Identity: "api:agent", Principal: "agent", FrontEnd: "mcp"}, st, logger())
	}()
	s, err := sdk.NewClient(&sdk.Implementation{Name: "dlqbot-test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var p engine.Preview
	if msg := callTool(t, s, "dlq_preview", map[string]any{"selection": dlq}, &p); msg != "" {
		t.Fatalf("dlq_preview: %s", msg)
	}
	var w struct{ Status, Channel, TS string }
	if msg := callTool(t, s, "dlq_replay", map[string]any{"token": p.Token}, &w); msg != "" || w.Status != "waiting_for_approval" {
		t.Fatalf("dlq_replay: %s %+v", msg, w)
	}
	praw, _ := json.Marshal(p)
	if !strings.Contains(string(praw), kycName) {
		t.Fatalf("the agent's own preview (a reader's, through the API) lacks the failure's text: %s", praw)
	}

	// A reader's Show samples on that post: the texts, privately.
	nb := len(e.stub.Ephemerals("U0BOB00001"))
	e.click("U0BOB00001", blocks.ActionSamples, p.Token, w.TS)
	if raw, _ := json.Marshal(e.waitEphemeral("U0BOB00001", nb+1)); !strings.Contains(string(raw), kycName) {
		t.Fatalf("a reader's samples of the approval request lack the failure's text: %s", raw)
	}

	seen := channelVisible(t, e.env)
	for _, want := range []string{"follow-up +", "com.acme.KycException", "asks a person to approve"} {
		if !strings.Contains(seen, want) {
			t.Errorf("the channels never saw %q: the test does not cover what it says", want)
		}
	}
	for _, leak := range []string{kycName, kycEmail, "suspected fraud", "is closed"} {
		if strings.Contains(seen, leak) {
			i := strings.Index(seen, leak)
			t.Errorf("a channel saw %q: …%s…", leak, seen[max(0, i-300):min(len(seen), i+100)])
		}
	}
}

// TestHeaderTargetWithInvisibleCharacter: an NServiceBus failure whose
// FailedQ is the source queue's name with a zero-width space is no valid
// target: the preview says so and lists one target, the reader sees the
// name quoted, and the replay leaves that message in the DLQ.
func TestHeaderTargetWithInvisibleCharacter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	src, dlq := testkit.Name("src"), testkit.Name("error")
	e.rabbit.Queue(src, nil)
	e.rabbit.Queue(dlq, nil)
	nsb := func(id, failedQ string) amqp.Publishing {
		return testkit.Msg(id, []byte(`{}`), amqp.Table{"NServiceBus.FailedQ": failedQ + "@host",
			"NServiceBus.ExceptionInfo.ExceptionType": "System.InvalidOperationException",
			"NServiceBus.ExceptionInfo.Message":       "failed", "NServiceBus.TimeOfFailure": "2026-12-01 10:00:00:000000 Z"})
	}
	e.rabbit.Publish(dlq, nsb("ok-1", src), nsb("zw-1", src+"\u200b"))
	e.rabbit.WaitCount(dlq, 2, 20*time.Second)
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })

	e.command("U0REQUEST1", "preview "+dlq)
	post, token := e.waitPreview(1)
	c := post.Content()
	if !strings.Contains(c, "No valid target") || !strings.Contains(c, "to 1 target queue") {
		t.Fatalf("the preview does not refuse the invisible character's target: %q", c)
	}
	samples := e.waitEphemeral("U0REQUEST1", 1)
	if raw, _ := json.Marshal(samples); !strings.Contains(string(raw), `\\u200b`) {
		t.Fatalf("the reader's samples do not quote the invalid name: %s", raw)
	}
	e.click("U0APPROVE1", blocks.ActionApprove, token, post.TS)
	e.waitProgress(post.TS, "Finished", 60*time.Second)
	if r := e.replays()[0]; r.Total != 1 || r.Sent != 1 {
		t.Fatalf("replay %+v: want 1 sent", r)
	}
	if n := e.rabbit.Count(dlq); n != 1 {
		t.Fatalf("%d left in the DLQ, want the one without a valid target", n)
	}
}
