package integration_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestPreviewShowsTheOutcomeRunByAnotherReplica: a replay previewed and
// approved through one replica (which has no worker) is run by another,
// sharing only Redis and the broker; the preview's own message ends
// showing the replay's outcome (the running replica renders the preview
// from the token store), not "Approved by …".
func TestPreviewShowsTheOutcomeRunByAnotherReplica(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{noWorker: true})
	st, on := e.store, testkit.Rabbit3

	// The other replica: its own notifier, engine and worker.
	b, err := amqp.New(amqp.Config{URL: on.AMQPURL, ManagementURL: on.ManagementURL, ReadMarks: st.ReadMarks()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	n, err := bot.NewNotifier(bot.Config{SigningSecret: secret, BotToken: "xoxb-integration", APIURL: e.stub.APIURL(), ActivityChannel: activity},
		bot.NotifierDeps{Replays: st.Replays(), Refs: st.SlackRefs(), Previews: st.Tokens(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	other, err := replay.New(fast, replay.Deps{Broker: b, Mover: b, Counters: b, Watches: b, Tokens: st.Tokens(), Ledger: st.Ledger(),
		Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(), Notifier: n, Jobs: st.Jobs(), Registry: st.Workers(), Claims: st.Claims(), Consumers: testkit.ConsumersOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, TapGaps: testkit.TapOff{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = other.Work(ctx, engine.WorkerConfig{Block: 200 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = n.Shutdown(sctx)
	})

	src, dlq := dlqWith(e, 6)
	e.rabbit.Consume(src, func(amqp091.Delivery) string { return "ack" })
	e.command("U0REQUEST1", "preview "+dlq)
	preview, token := e.waitPreview(1)
	e.click("U0APPROVE1", blocks.ActionApprove, token, preview.TS)

	want := "Finished clean*: 6 sent, 6 settled, 0 back"
	testkit.Eventually(t, time.Minute, "the preview to show the outcome", func() bool {
		return strings.Contains(string(e.thread(preview.TS).RawBlocks), want)
	})
	raw := string(e.thread(preview.TS).RawBlocks)
	if !strings.Contains(raw, blocks.BlockPreviewStatus) || !strings.Contains(raw, dlq) || !strings.Contains(raw, "Approved by") || strings.Contains(raw, blocks.ActionApprove) {
		t.Errorf("the preview as the running replica left it:\n%s", raw)
	}
	if n := e.rabbit.Count(dlq); n != 0 {
		t.Errorf("the DLQ holds %d after the replay finished", n)
	}
}
