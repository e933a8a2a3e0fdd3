package integration_test

import (
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestApproveAnywayRefusesAChangeSinceItWasShown: "Approve anyway" approves
// despite exactly the changes its message showed. A previewed message that
// leaves the DLQ after that message was posted is a change nobody saw: the
// click is refused, nothing is sent, and a new message shows it with its
// own "Approve anyway", which then approves.
func TestApproveAnywayRefusesAChangeSinceItWasShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	src, dlq := dlqWith(e, 4)
	consumer := e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })
	e.command("U0REQUEST1", "preview "+dlq)
	preview, token := e.waitPreview(1)
	consumer.Stop() // the target loses its consumers after the preview

	// changesAfter waits for a "what changed" reply in the preview's
	// thread other than the ones in seen.
	changesAfter := func(seen ...string) slackstub.Message {
		var m slackstub.Message
		testkit.Eventually(t, 30*time.Second, "what changed, in the thread", func() bool {
		next:
			for _, r := range e.thread(preview.TS).Replies {
				for _, ts := range seen {
					if r.TS == ts {
						continue next
					}
				}
				if buttonValue(r.RawBlocks, blocks.ActionApprove) != "" {
					m = r
					return true
				}
			}
			return false
		})
		return m
	}
	e.click("U0APPROVE1", blocks.ActionApprove, token, preview.TS)
	first := changesAfter()
	if !strings.Contains(first.Content(), "Consumers gone") || strings.Contains(first.Content(), "Messages gone") {
		t.Fatalf("first changes %q, want only the consumers gone", first.Content())
	}

	// A change lands after the person looked: a previewed message is
	// consumed from the DLQ.
	testkit.Eventually(t, 20*time.Second, "the preview's give-backs in the DLQ", func() bool { return e.rabbit.Count(dlq) == 4 })
	if _, ok, err := e.rabbit.Channel().Get(dlq, true); err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	e.click("U0APPROVE1", blocks.ActionApprove, buttonValue(first.RawBlocks, blocks.ActionApprove), first.TS)
	second := changesAfter(first.TS)
	if !strings.Contains(second.Content(), "Messages gone") || !strings.Contains(second.Content(), "Consumers gone") {
		t.Fatalf("second changes %q, want the message gone beside the consumers gone", second.Content())
	}
	if rs := e.replays(); len(rs) != 0 || e.rabbit.Count(dlq) != 3 || e.rabbit.Count(src) != 0 {
		t.Fatalf("an approval of changes nobody saw moved something: %d replays, DLQ %d, target %d", len(rs), e.rabbit.Count(dlq), e.rabbit.Count(src))
	}

	// Its own "Approve anyway" approves what it showed (the world as it
	// showed it: a consumer back by then would be a change too).
	e.click("U0APPROVE1", blocks.ActionApprove, buttonValue(second.RawBlocks, blocks.ActionApprove), second.TS)
	testkit.Eventually(t, 30*time.Second, "the replay approved", func() bool { return len(e.replays()) == 1 })
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })
	// It sends the three still there (and, the fourth having
	// disappeared, says so rather than "finished").
	testkit.Eventually(t, 60*time.Second, "the three still there sent", func() bool {
		rs := e.replays()
		return len(rs) == 1 && rs[0].Sent == 3 && e.rabbit.Count(dlq) == 0
	})
}
