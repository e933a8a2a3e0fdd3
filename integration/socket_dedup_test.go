package integration_test

import (
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestSocketModeRetriesAreActedOnOnce: Slack delivers a Socket Mode
// envelope again when it saw no ack in time. A slash command delivered
// again — under its envelope id, or under a new one with the same
// trigger_id — is acked without a reply and previews nothing more; an
// Approve click delivered again starts no second approval: the one
// replay moves the DLQ's messages once, the approver hears of no second
// attempt, and the log says each retry was dropped. The record is the
// Redis one signed HTTP requests use.
func TestSocketModeRetriesAreActedOnOnce(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	e := newEnv(t, options{appToken: "xapp-1-integration", logs: logs})
	src, dlq := dlqWith(e, 4)
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })
	testkit.Eventually(t, 10*time.Second, "a Socket Mode connection", e.stub.SocketConnected)

	ack, err := e.stub.SocketCommand("/dlq", "preview "+dlq, "U0REQUEST1", channel)
	if err != nil || !strings.Contains(string(ack), "Previewing") {
		t.Fatalf("preview ack %s, %v", ack, err)
	}
	for _, newEnvelope := range []bool{false, true} {
		ack, err := e.stub.SocketRetry(newEnvelope)
		if err != nil || strings.Contains(string(ack), "Previewing") {
			t.Fatalf("retried command (new envelope %v): ack %s, %v: want acked and dropped", newEnvelope, ack, err)
		}
	}
	preview, token := e.waitPreview(1)
	if err := e.stub.SocketClick(blocks.ActionApprove, token, "U0APPROVE1", channel, preview.TS); err != nil {
		t.Fatal(err)
	}
	if _, err := e.stub.SocketRetry(false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.stub.SocketRetry(true); err != nil {
		t.Fatal(err)
	}
	e.waitProgress(preview.TS, "Finished", 90*time.Second)
	// The broker's word: the four messages left the DLQ once.
	e.rabbit.WaitCount(dlq, 0, 20*time.Second)
	if rs := e.replays(); len(rs) != 1 || rs[0].Sent != 4 {
		t.Fatalf("replays %+v, want one that sent 4", rs)
	}
	// A second preview, had the retries been acted on, would show as a
	// second preview post; a second approval as an "already approved"
	// answer.
	// (The replay's outcome line is a plain post beside it, no blocks.)
	n := 0
	for _, m := range e.stub.Messages(channel) {
		if len(m.RawBlocks) > 0 {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d posts with blocks in the channel, want the one preview", n)
	}
	for _, eph := range e.stub.Ephemerals("U0APPROVE1") {
		if strings.Contains(eph.Text, "already approved") {
			t.Fatalf("a retried click was acted on: %q", eph.Text)
		}
	}
	if l := logs.lines("the same request was received before", `"retry_attempt":1`); len(l) != 4 {
		t.Fatalf("%d retries logged as dropped, want 4: %q", len(l), l)
	}
}
