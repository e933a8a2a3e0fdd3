package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
)

// seedThread posts a preview-like parent and a progress reply in the
// stand-in and records them on replay id in the fake store.
func seedThread(t *testing.T, h *harness, id string) (parent, progress string) {
	t.Helper()
	api := slack.New("xoxb-seed", slack.OptionAPIURL(h.stub.APIURL()))
	_, parent, err := api.PostMessage("C_OPS", slack.MsgOptionText("preview", false))
	if err != nil {
		t.Fatal(err)
	}
	_, progress, err = api.PostMessage("C_OPS", slack.MsgOptionText("progress", false), slack.MsgOptionTS(parent))
	if err != nil {
		t.Fatal(err)
	}
	h.store.replays[id] = engine.Replay{ID: id}
	_ = h.store.Set(context.Background(), id, "C_OPS", parent, progress)
	return parent, progress
}

func event(id string, kind engine.EventKind, state engine.State, sent int, step *engine.StepResult) engine.Event {
	return engine.Event{Kind: kind, Step: step, At: time.Now(), Replay: engine.Replay{
		ID: id, DLQ: "orders.dlq", State: state, Total: 100, Sent: sent, Approver: "U_APP", Requester: "U_REQ",
		Params: engine.Params{Step: 10, Cap: 500, Rate: 50, Timeout: time.Minute},
	}}
}

// editGaps returns the gaps between successful edits of a message.
func editGaps(m slackstub.Message) []time.Duration {
	var gaps []time.Duration
	for i := 1; i < len(m.EditedAt); i++ {
		gaps = append(gaps, m.EditedAt[i].Sub(m.EditedAt[i-1]))
	}
	return gaps
}

func TestProgressEditsAreCoalescedAndTheFinalStateArrives(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	_, progress := seedThread(t, h, "r_coal")
	// Slack holds the first two edits off for a second each (429,
	// Retry-After: 1): a Notify that waited for Slack would take that long,
	// which no amount of machine load makes 30 in-memory calls take.
	h.stub.RateLimit("chat.update", 2)
	start := time.Now()
	h.bot.Notify(context.Background(), event("r_coal", engine.EventStarted, engine.StateRunning, 0, nil))
	for i := 1; i <= 28; i++ {
		h.bot.Notify(context.Background(), event("r_coal", engine.EventStepPassed, engine.StateRunning, i*3,
			&engine.StepResult{Step: i, Planned: 3, Sent: 3, Settled: 3, Observation: "left the target queue"}))
	}
	h.bot.Notify(context.Background(), event("r_coal", engine.EventFinished, engine.StateFinished, 100, nil))
	if took := time.Since(start); took > 900*time.Millisecond {
		t.Fatalf("30 Notify calls took %s: they must not wait for Slack", took)
	}
	testkit.Eventually(t, 10*time.Second, "the finished state", func() bool {
		m, _ := h.stub.Message("C_OPS", progress)
		return strings.Contains(string(m.RawBlocks), "Finished")
	})
	m, _ := h.stub.Message("C_OPS", progress)
	if m.Edits() > 3 {
		t.Errorf("%d edits for 30 events in about a second, want them coalesced", m.Edits())
	}
	for _, g := range editGaps(m) {
		if g < 900*time.Millisecond {
			t.Errorf("edits %s apart, want at least 1s", g)
		}
	}
	testkit.Eventually(t, 10*time.Second, "30 thread replies", func() bool {
		p, _ := h.stub.Message("C_OPS", m.ThreadTS)
		return len(p.Replies) == 31 // the progress message and 30 replies
	})
	testkit.Eventually(t, 5*time.Second, "2 activity lines", func() bool { return len(h.stub.Messages("C_ACTIVITY")) == 2 })
	act := h.stub.Messages("C_ACTIVITY")
	if !strings.Contains(act[0].Text, "started") || !strings.Contains(act[1].Text, "finished") {
		t.Fatalf("activity lines %q, %q", act[0].Text, act[1].Text)
	}
}

func TestProgressHonoursRateLimitsAndOutages(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	_, progress := seedThread(t, h, "r_429")
	h.stub.RateLimit("chat.update", 2)
	h.stub.Fail("chat.postMessage", 1, 500)
	h.bot.Notify(context.Background(), event("r_429", engine.EventStarted, engine.StateRunning, 0, nil))
	h.bot.Notify(context.Background(), event("r_429", engine.EventStopped, engine.StateStopped, 10,
		&engine.StepResult{Step: 1, Planned: 10, Sent: 10, Returned: 10, Observation: "10 came back"}))
	testkit.Eventually(t, 15*time.Second, "the stopped state", func() bool {
		m, _ := h.stub.Message("C_OPS", progress)
		return strings.Contains(string(m.RawBlocks), "Stopped")
	})
	calls := h.stub.Calls("chat.update")
	if len(calls) != 3 || calls[0].Status != 429 || calls[1].Status != 429 || calls[2].Status != 200 {
		t.Fatalf("chat.update calls: %+v, want 429, 429, 200", calls)
	}
	for i := 1; i < len(calls); i++ {
		if gap := calls[i].At.Sub(calls[i-1].At); gap < 900*time.Millisecond {
			t.Errorf("call %d came %s after a 429 with Retry-After: 1", i, gap)
		}
	}
	testkit.Eventually(t, 10*time.Second, "both thread replies despite a 500", func() bool {
		n := 0
		for _, c := range h.stub.Calls("chat.postMessage") {
			if c.Status == 200 && c.Args.Get("thread_ts") != "" && c.Args.Get("channel") == "C_OPS" {
				n++
			}
		}
		return n == 3 // the seeded progress message and two replies
	})
}

func TestFollowUpsAndParkingPostInTheThreadOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	parent, progress := seedThread(t, h, "r_follow")
	r := engine.Replay{ID: "r_follow", DLQ: "orders.dlq", State: engine.StateFinished}
	h.bot.Notify(context.Background(), engine.Event{Kind: engine.EventFollowUp, Replay: r, At: time.Now(),
		Check: &engine.CheckReport{ReplayID: r.ID, DLQ: r.DLQ, Replayed: 10, Returned: 2, Label: "+5m", Groups: []engine.CheckGroup{{Group: "timeout", Count: 2}}}})
	h.bot.Notify(context.Background(), engine.Event{Kind: engine.EventParked, Replay: r, Actor: "U0PARKER01", At: time.Now(),
		Text: "2 message(s) of replay r_follow moved from orders.dlq to orders.dlq.parking"})
	testkit.Eventually(t, 5*time.Second, "the report and the parking line in the thread", func() bool {
		p, _ := h.stub.Message("C_OPS", parent)
		return len(p.Replies) == 3
	})
	p, _ := h.stub.Message("C_OPS", parent)
	if c := p.Replies[1].Content(); !strings.Contains(c, "Did replay") || !strings.Contains(c, "follow-up +5m") {
		t.Errorf("follow-up reply %q", c)
	}
	if c := p.Replies[2].Content(); !strings.Contains(c, ":parking: 2 message(s)") || !strings.Contains(c, "<@U0PARKER01>") {
		t.Errorf("parking reply %q", c)
	}
	testkit.Eventually(t, 5*time.Second, "two activity lines", func() bool { return len(h.stub.Messages("C_ACTIVITY")) == 2 })
	if m, _ := h.stub.Message("C_OPS", progress); m.Edits() != 0 {
		t.Errorf("a follow-up or parking edited the progress message %d times", m.Edits())
	}
}

func TestDeletedProgressMessageIsPostedAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	parent, progress := seedThread(t, h, "r_gone")
	api := slack.New("xoxb-seed", slack.OptionAPIURL(h.stub.APIURL()))
	if _, _, err := api.DeleteMessage("C_OPS", progress); err != nil {
		t.Fatal(err)
	}
	h.bot.Notify(context.Background(), event("r_gone", engine.EventFinished, engine.StateFinished, 100, nil))
	testkit.Eventually(t, 5*time.Second, "a new progress message", func() bool {
		p, _ := h.stub.Message("C_OPS", parent)
		for _, r := range p.Replies {
			if strings.Contains(r.Content(), "Finished") && len(r.RawBlocks) > 0 {
				return true
			}
		}
		return false
	})
	testkit.Eventually(t, 5*time.Second, "the record to point at it", func() bool {
		now := h.store.Refs("r_gone")[2]
		return now != "" && now != progress
	})
}

// TestFollowUpInTheThreadShowsNoExceptionText: a follow-up check posted
// in the replay's thread (seen by the whole channel) shows the counts and
// each failure group's type and id, not the group's text nor the examples'
// exception text, which readers get from `check` (ephemeral).
func TestFollowUpInTheThreadShowsNoExceptionText(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	parent, _ := seedThread(t, h, "r_private")
	r := engine.Replay{ID: "r_private", DLQ: "orders.dlq", State: engine.StateFinished}
	group := "com.acme.CardDeclined: card <n> of Jane declined"
	h.bot.Notify(context.Background(), engine.Event{Kind: engine.EventFollowUp, Replay: r, At: time.Now(),
		Check: &engine.CheckReport{ReplayID: r.ID, DLQ: r.DLQ, Replayed: 10, Returned: 2, Label: "+5m",
			Groups: []engine.CheckGroup{{Group: group, Type: "com.acme.CardDeclined", Count: 2, ExampleID: "m1", Example: "card 4111111111111111 of Jane declined"}}}})
	testkit.Eventually(t, 5*time.Second, "the follow-up in the thread", func() bool {
		p, _ := h.stub.Message("C_OPS", parent)
		return len(p.Replies) == 2
	})
	p, _ := h.stub.Message("C_OPS", parent)
	c := p.Replies[1].Content()
	if !strings.Contains(c, "com.acme.CardDeclined") || !strings.Contains(c, engine.GroupID(group)) {
		t.Errorf("the follow-up does not name the group by its type and id: %q", c)
	}
	for _, leak := range []string{"4111111111111111", "Jane", "declined"} {
		if strings.Contains(c, leak) {
			t.Errorf("the follow-up in the channel shows exception text %q: %q", leak, c)
		}
	}
}
