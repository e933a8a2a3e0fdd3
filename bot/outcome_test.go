package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// After a stop, a finish and a cancellation, the preview the replay was
// approved from leads with its outcome, the channel has one outcome line
// outside the thread, and that line and the activity lines link the
// thread and the replay's dashboard page.
func TestThePreviewIsTheReplaysStatus(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		end  func(engine.Event) engine.Event
		want string
	}{
		{"stopped", func(e engine.Event) engine.Event {
			e.Kind, e.Replay.State, e.Replay.Step, e.Replay.Sent, e.Replay.Settled, e.Replay.Returned = engine.EventStopped, engine.StateStopped, 1, 10, 7, 3
			e.Replay.Failures = []engine.Failure{{ID: "0123456789abcdef", Kind: engine.FailureReturned, Reason: "rejected", GroupID: "g3f2a00000001"}}
			return e
		}, "Stopped by itself* at step 1: 3 of 10 came back — rejected (group `g3f2a00000001`)"},
		{"finished", func(e engine.Event) engine.Event {
			e.Kind, e.Replay.State, e.Replay.Sent, e.Replay.Settled = engine.EventFinished, engine.StateFinished, 100, 100
			return e
		}, "Finished clean*: 100 sent, 100 settled, 0 back"},
		{"cancelled", func(e engine.Event) engine.Event {
			e.Kind, e.Replay.State, e.Replay.Sent, e.Replay.Settled = engine.EventCancelled, engine.StateCancelled, 20, 20
			return e
		}, "Cancelled*: replay `r_fake`, 20 of 100 sent"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil, func(cfg *bot.Config) { cfg.DashboardURL = "https://dlqbot.example.com" })
			preview := h.previewQueued(t)
			start := event("r_fake", engine.EventStarted, engine.StateRunning, 0, nil)
			h.bot.Notify(context.Background(), start)
			h.bot.Notify(context.Background(), c.end(start))

			testkit.Eventually(t, 30*time.Second, "the preview to show the outcome", func() bool {
				m, _ := h.stub.Message("C_OPS", preview.TS)
				return strings.Contains(string(m.RawBlocks), c.want)
			})
			m, _ := h.stub.Message("C_OPS", preview.TS)
			if strings.Contains(string(m.RawBlocks), blocks.ActionApprove) || !strings.Contains(string(m.RawBlocks), "requested by") {
				t.Errorf("the edited preview keeps its buttons or lost its body:\n%s", m.RawBlocks)
			}
			thread := h.stub.URL() + "/archives/C_OPS/p" + strings.ReplaceAll(preview.TS, ".", "")
			dash := "https://dlqbot.example.com/dashboard/replays/r_fake"
			testkit.Eventually(t, 10*time.Second, "one outcome line in the channel", func() bool { return len(h.stub.Messages("C_OPS")) == 2 })
			line := h.stub.Messages("C_OPS")[1]
			if line.ThreadTS != "" || !strings.Contains(line.Text, c.want) || !strings.Contains(line.Text, "<"+thread) || !strings.Contains(line.Text, "<"+dash+"|dashboard>") {
				t.Errorf("outcome line %+v: want %q outside the thread, linking %s and %s", line, c.want, thread, dash)
			}
			testkit.Eventually(t, 5*time.Second, "2 activity lines", func() bool { return len(h.stub.Messages("C_ACTIVITY")) == 2 })
			for _, a := range h.stub.Messages("C_ACTIVITY") {
				if !strings.Contains(a.Text, "<"+thread) || !strings.Contains(a.Text, "|dashboard>") {
					t.Errorf("activity line %q does not link the thread and the dashboard", a.Text)
				}
			}
			if n := len(h.stub.Messages("C_OPS")); n != 2 {
				t.Errorf("%d top-level messages in the channel, want the preview and one outcome line", n)
			}
		})
	}
}

// The preview's Details button shows its mechanics to whoever clicked,
// ephemerally; the card itself leads with its verdict.
func TestPreviewDetailsButton(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	if _, err := h.stub.SlashCommand(h.srv.URL, "/dlq", "preview orders.dlq", "U_REQ", "C_OPS"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the preview", func() bool { return len(h.stub.Messages("C_OPS")) == 1 })
	h.previewPosted(t, "p_fake")
	raw := string(h.stub.Messages("C_OPS")[0].RawBlocks)
	if !strings.Contains(raw, blocks.ActionDetails) || !strings.Contains(raw, "Safe to replay") || strings.Contains(raw, "*Scanned*") {
		t.Fatalf("preview card without a Details button or a verdict headline, or with its mechanics:\n%s", raw)
	}
	resp, err := h.stub.Click(h.srv.URL, blocks.ActionDetails, "p_fake", "U_SRE", "C_OPS", h.stub.Messages("C_OPS")[0].TS)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	testkit.Eventually(t, 10*time.Second, "the details, to the clicker alone", func() bool {
		for _, e := range h.stub.Ephemerals("U_SRE") {
			if strings.Contains(string(e.RawBlocks), "*Scanned*") {
				return true
			}
		}
		return false
	})
}

// A replay approved through one replica and run by another (or by this
// one after a restart, its memory of the preview gone): the replica that
// runs it renders the preview from the token store and edits it to lead
// with the outcome, so the preview never stays "Approved by …".
func TestThePreviewShowsTheOutcomeWhicheverReplicaRunsIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	preview := h.previewQueued(t)

	// The other replica shares only the store: where the replay shows, and
	// the preview behind its token.
	cfg := bot.Config{SigningSecret: secret, BotToken: "xoxb-test", APIURL: h.stub.APIURL(), ActivityChannel: "C_ACTIVITY"}
	other, err := bot.NewNotifier(cfg, bot.NotifierDeps{Replays: h.store, Refs: refsOf{h.store}, Previews: h.store, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = other.Shutdown(ctx)
	})
	start := event("r_fake", engine.EventStarted, engine.StateRunning, 0, nil)
	start.Replay.Token = "p_fake"
	other.Notify(context.Background(), start)
	end := start
	end.Kind, end.Replay.State, end.Replay.Sent, end.Replay.Settled = engine.EventFinished, engine.StateFinished, 100, 100
	end.Replay.UpdatedAt = start.Replay.UpdatedAt.Add(time.Second)
	other.Notify(context.Background(), end)

	testkit.Eventually(t, 30*time.Second, "the preview to show the outcome", func() bool {
		m, _ := h.stub.Message("C_OPS", preview.TS)
		return strings.Contains(string(m.RawBlocks), "Finished clean*: 100 sent, 100 settled, 0 back")
	})
	raw := func() string { m, _ := h.stub.Message("C_OPS", preview.TS); return string(m.RawBlocks) }()
	for _, want := range []string{"requested by", "orders.dlq", "Approved by"} {
		if !strings.Contains(raw, want) {
			t.Errorf("the preview as the other replica edited it lacks %q:\n%s", want, raw)
		}
	}
	if strings.Contains(raw, blocks.ActionApprove) {
		t.Errorf("the preview offers its buttons again:\n%s", raw)
	}
}
