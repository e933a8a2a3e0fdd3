package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// exceptionText is what the card's failure group would say if its text
// leaked: a customer's name and address.
const exceptionText = "currency XTS not supported for customer John Roe, john.roe@example.com"

// cardPreview is a preview with a problem and two failure groups, one of
// them named in its text after a customer.
func cardPreview(now time.Time) *engine.Preview {
	xts := engine.ArrivalRow{Key: "java.lang.IllegalArgumentException: " + exceptionText, Type: "java.lang.IllegalArgumentException",
		Messages: 30, First: now.Add(-time.Hour), Last: now.Add(-time.Minute), Counts: []int{10, 20}}
	xts.GroupID = engine.GroupID(xts.Key)
	nf := engine.ArrivalRow{Key: "order <n> not found", Type: "rejected", Messages: 10, First: now.Add(-time.Hour), Last: now.Add(-30 * time.Minute), Counts: []int{10, 0}}
	nf.GroupID = engine.GroupID(nf.Key)
	return &engine.Preview{DLQ: engine.QueueInfo{Name: "orders.dlq", Exists: true}, Selection: "orders.dlq", Requester: "U_REQ",
		Selected: 40, Distinct: 40,
		Problems: []engine.Problem{{Kind: engine.ProblemTargetMissing, Queue: "payments.settle", Messages: 10,
			Detail: "target queue payments.settle does not exist: its 10 message(s) would stay in the DLQ"}},
		Targets: []engine.TargetView{{Queue: "orders", Exists: true, Consumers: 2, Messages: 30}, {Queue: "payments.settle", Messages: 10}},
		Arrivals: &engine.Arrivals{Start: now.Add(-time.Hour), Bucket: 30 * time.Minute, Now: now, RecentWindow: engine.ArrivalsRecent,
			ArrivalRow: engine.ArrivalRow{Messages: 40, First: now.Add(-time.Hour), Last: now.Add(-time.Minute), Counts: []int{20, 20}},
			Groups:     []engine.ArrivalRow{xts, nf}},
	}
}

// A replica that did not post the preview edits it into the replay's
// status from the preview the token store keeps: the verdict, the
// problems and the failure groups (by id, type and counts) are there, and
// no exception text is anywhere in the channel.
func TestAnotherReplicaShowsThePreviewsProblemsAndGroups(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	preview := h.previewQueued(t)

	// The preview as the engine froze it, in Redis: the other replica's
	// only knowledge of it.
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix, SigningKey: []byte("bot-test-signing-key-0123456789abcdef")}, rdb, engine.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	p := cardPreview(time.Now())
	tok, err := st.Tokens().Save(context.Background(), engine.Frozen{DLQ: "orders.dlq", Selection: p.Selection, Requester: "U_REQ",
		Total: 40, Card: engine.CardOf(p), Items: []engine.Item{{ID: "0123456789abcdef", Count: 40, Target: "orders"}}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg := bot.Config{SigningSecret: secret, BotToken: "xoxb-test", APIURL: h.stub.APIURL(), ActivityChannel: "C_ACTIVITY"}
	other, err := bot.NewNotifier(cfg, bot.NotifierDeps{Replays: h.store, Refs: refsOf{h.store}, Previews: st.Tokens(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = other.Shutdown(ctx)
	})
	start := event("r_fake", engine.EventStarted, engine.StateRunning, 0, nil)
	start.Replay.Token = tok
	other.Notify(context.Background(), start)
	end := start
	end.Kind, end.Replay.State, end.Replay.Sent, end.Replay.Settled = engine.EventFinished, engine.StateFinished, 100, 100
	end.Replay.UpdatedAt = start.Replay.UpdatedAt.Add(time.Second)
	other.Notify(context.Background(), end)

	testkit.Eventually(t, 30*time.Second, "the preview to show the outcome", func() bool {
		m, _ := h.stub.Message("C_OPS", preview.TS)
		return strings.Contains(string(m.RawBlocks), "Finished clean")
	})
	m, _ := h.stub.Message("C_OPS", preview.TS)
	shown := m.Content()
	for _, want := range []string{"1 problem*", "Target queue missing", "payments.settle", p.Arrivals.Groups[0].GroupID,
		"java.lang.IllegalArgumentException", p.Arrivals.Groups[1].GroupID, "*30* ×", "Approved by"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the preview as the other replica edited it lacks %q:\n%s", want, shown)
		}
	}
	testkit.Eventually(t, 10*time.Second, "the outcome line", func() bool { return len(h.stub.Messages("C_OPS")) == 2 })
	for _, ch := range []string{"C_OPS", "C_ACTIVITY"} {
		for _, msg := range h.stub.Messages(ch) {
			all := []string{msg.Text, string(msg.RawBlocks), msg.Content()}
			for _, r := range msg.Replies {
				all = append(all, r.Text, string(r.RawBlocks))
			}
			for _, s := range all {
				if strings.Contains(s, "John Roe") || strings.Contains(s, "currency XTS") {
					t.Errorf("%s shows the exception's text: %s", ch, s)
				}
			}
		}
	}
}
