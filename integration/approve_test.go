package integration_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
)

func TestTenConcurrentApprovesStartOneReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	src, dlq := dlqWith(e, 10)
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })
	e.command("U0REQUEST1", "preview "+dlq)
	preview, token := e.waitPreview(1)

	payloads := make([][]byte, 10)
	for i := range payloads {
		p, err := e.stub.ClickPayload(blocks.ActionApprove, token, fmt.Sprintf("U0CLICKER%d", i), channel, preview.TS)
		if err != nil {
			t.Fatal(err)
		}
		payloads[i] = p
	}
	var wg sync.WaitGroup
	codes := make([]int, len(payloads))
	for i, p := range payloads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := e.stub.PostPayload(e.srv.URL, p, time.Time{})
			if err != nil {
				t.Error(err)
				return
			}
			_ = resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Fatalf("click %d: status %d", i, c)
		}
	}
	clickers := func() (n []slackstub.Ephemeral) {
		for _, eph := range e.stub.Ephemerals("") {
			if strings.HasPrefix(eph.User, "U0CLICKER") {
				n = append(n, eph)
			}
		}
		return n
	}
	testkit.Eventually(t, 20*time.Second, "nine refusals", func() bool { return len(clickers()) == 9 })
	for _, eph := range clickers() {
		if !strings.Contains(eph.Text, "already approved") {
			t.Errorf("refusal to %s: %q", eph.User, eph.Text)
		}
	}
	e.waitProgress(preview.TS, "Finished", 60*time.Second)
	if rs := e.replays(); len(rs) != 1 || rs[0].Sent != 10 {
		t.Fatalf("%d replays, want exactly one that sent 10", len(rs))
	}
	// One approval edited the preview, to lead with the replay's status:
	// queued, or a later state when the replay ran ahead of the approval's
	// answer (bot/outcome.go showRoot); the other edits carry its later
	// states (the preview is its status). Ten approvals would edit it ten
	// times at least.
	queued := 0
	for _, c := range e.stub.Calls("chat.update") {
		if c.Args.Get("ts") == preview.TS && strings.Contains(c.Args.Get("blocks"), "*Queued*") {
			queued++
		}
	}
	if m := e.thread(preview.TS); queued > 1 || m.Edits() < 1 || m.Edits() > 3 {
		t.Fatalf("preview edited %d times, %d of them showing the replay queued: want one approval's edit and one edit per later state", m.Edits(), queued)
	}
}

func TestForgedStaleAndMalformedRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	_, dlq := dlqWith(e, 3)
	e.command("U0REQUEST1", "preview "+dlq)
	preview, token := e.waitPreview(1)
	e.waitEphemeral("U0REQUEST1", 1) // the samples, to the requester alone
	before := len(e.stub.Calls(""))

	click, err := e.stub.ClickPayload(blocks.ActionApprove, token, "U0APPROVE1", channel, preview.TS)
	if err != nil {
		t.Fatal(err)
	}
	clickBody := []byte(url.Values{"payload": {string(click)}}.Encode())
	cmdBody := []byte(e.stub.CommandForm("/dlq", "replay "+token, "U0APPROVE1", channel).Encode())
	forger := slackstub.New("not-the-secret")
	defer forger.Close()
	post := func(s *slackstub.Stub, path string, body []byte, at time.Time) int {
		resp, err := s.Post(e.srv.URL+path, "application/x-www-form-urlencoded", body, at)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	stale := time.Now().Add(-6 * time.Minute)
	for name, got := range map[string][2]int{
		"forged click":       {post(forger, slackstub.InteractionsPath, clickBody, time.Time{}), 401},
		"forged command":     {post(forger, slackstub.CommandsPath, cmdBody, time.Time{}), 401},
		"stale click":        {post(e.stub, slackstub.InteractionsPath, clickBody, stale), 401},
		"stale command":      {post(e.stub, slackstub.CommandsPath, cmdBody, stale), 401},
		"malformed payload":  {post(e.stub, slackstub.InteractionsPath, []byte("payload=%7B%22type%22%3A"), time.Time{}), 400},
		"malformed command":  {post(e.stub, slackstub.CommandsPath, []byte("text=replay+"+token), time.Time{}), 400},
		"payload, no action": {post(e.stub, slackstub.InteractionsPath, []byte(url.Values{"payload": {`{"type":"block_actions","user":{"id":"U0APPROVE1"}}`}}.Encode()), time.Time{}), 400},
	} {
		if got[0] != got[1] {
			t.Errorf("%s: status %d, want %d", name, got[0], got[1])
		}
	}
	if after := len(e.stub.Calls("")); after != before {
		t.Fatalf("%d Slack calls after rejected requests", after-before)
	}
	if len(e.stub.Ephemerals("")) != 1 || len(e.replays()) != 0 || e.rabbit.Count(dlq) != 3 { // the requester's samples
		t.Fatal("a rejected request had an effect")
	}
	if by, err := e.store.Tokens().UsedBy(context.Background(), token); err != nil || by != "" {
		t.Fatalf("token used by %q (%v)", by, err)
	}
}

func TestReplayCommandPauseResumeAndRateLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	src, dlq := dlqWith(e, 20)
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })
	e.command("U0REQUEST1", "preview "+dlq)
	preview, token := e.waitPreview(1)
	// The list file is attached once the bot has noted where the preview
	// is, which `replay <token>` needs to thread the replay under it.
	testkit.Eventually(t, 20*time.Second, "the message list file", func() bool { return len(e.stub.Files()) == 1 })

	e.command("U0APPROVE1", "replay "+token+" step=5 rate=4")
	prog := e.waitProgress(preview.TS, "Running", 20*time.Second)
	// The preview's edit and the progress post are two Slack calls: the
	// progress may land first.
	testkit.Eventually(t, 20*time.Second, "the replay command edits the preview", func() bool {
		return strings.Contains(e.thread(preview.TS).Content(), "Approved by <@U0APPROVE1>")
	})
	if eph := e.waitEphemeral("U0APPROVE1", 1); !strings.Contains(eph.Text, "is starting") {
		t.Fatalf("confirmation %q", eph.Text)
	}
	e.stub.RateLimit("chat.update", 2)
	id := buttonValue(prog.RawBlocks, blocks.ActionPause)
	e.click("U0APPROVE1", blocks.ActionPause, id, prog.TS)
	prog = e.waitProgress(preview.TS, "Paused", 20*time.Second)
	e.click("U0APPROVE1", blocks.ActionResume, buttonValue(prog.RawBlocks, blocks.ActionResume), prog.TS)
	prog = e.waitProgress(preview.TS, "Finished", 60*time.Second)
	assertEditsSpaced(t, prog)

	var limited int
	var last time.Time
	for _, c := range e.stub.Calls("chat.update") {
		// The preview carries the replay's status too: its edits may be
		// the ones Slack held off.
		if ts := c.Args.Get("ts"); ts == preview.TS && c.Status == http.StatusTooManyRequests {
			limited++
		}
		if c.Args.Get("ts") != prog.TS {
			continue
		}
		if !last.IsZero() && c.At.Sub(last) < bot.DefaultEditInterval {
			t.Errorf("progress edits %s apart", c.At.Sub(last))
		}
		last = c.At
		if c.Status == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited != 2 {
		t.Fatalf("%d rate-limited edits of the progress message and the preview, want 2", limited)
	}
	testkit.Eventually(t, 10*time.Second, "the lifecycle lines", func() bool {
		a := e.activityLines()
		return contains(a, "paused") && contains(a, "resumed") && contains(a, "finished")
	})
	if r := e.replays()[0]; r.State != engine.StateFinished || r.Sent != 20 || r.Params.Step != 5 {
		t.Fatalf("replay %+v", r)
	}
}

func TestChangedWorldAsksAgainThenApproveAnyway(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	src, dlq := dlqWith(e, 3)
	consumer := e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })
	e.command("U0REQUEST1", "preview "+dlq)
	preview, token := e.waitPreview(1)
	consumer.Stop() // the target loses its consumers after the preview

	e.click("U0APPROVE1", blocks.ActionApprove, token, preview.TS)
	var changes slackstub.Message
	testkit.Eventually(t, 20*time.Second, "what changed, in the thread", func() bool {
		for _, r := range e.thread(preview.TS).Replies {
			if buttonValue(r.RawBlocks, blocks.ActionApprove) != "" {
				changes = r
				return true
			}
		}
		return false
	})
	if !strings.Contains(changes.Content(), "Consumers gone") || len(e.replays()) != 0 || e.rabbit.Count(dlq) != 3 {
		t.Fatalf("changes %q; %d replays", changes.Content(), len(e.replays()))
	}
	anyway := buttonValue(changes.RawBlocks, blocks.ActionApprove)
	if tok, digest := blocks.ParseApproveValue(anyway); tok != token || digest == "" {
		t.Fatalf("approve anyway carries %q", anyway)
	}
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })
	e.click("U0APPROVE1", blocks.ActionApprove, anyway, changes.TS)
	prog := e.waitProgress(preview.TS, "Finished", 60*time.Second)
	if !strings.Contains(prog.Content(), "3 of 3 messages sent") {
		t.Errorf("progress: %q", prog.Content())
	}
	if !strings.Contains(e.thread(preview.TS).Content(), "Approved by") {
		t.Error("the preview does not show its approver")
	}
	if c, _ := e.stub.Message(channel, changes.TS); !strings.Contains(c.Content(), "Approved by") || buttonValue(c.RawBlocks, blocks.ActionApprove) != "" {
		t.Errorf("the changes message keeps its buttons: %q", c.Content())
	}
}

func TestDiscardDropsTheToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	_, dlq := dlqWith(e, 2)
	e.command("U0REQUEST1", "preview "+dlq)
	preview, token := e.waitPreview(1)
	e.click("U0REQUEST1", blocks.ActionDiscard, token, preview.TS)
	testkit.Eventually(t, 20*time.Second, "the preview to show it was discarded", func() bool {
		return strings.Contains(e.thread(preview.TS).Content(), "Discarded by <@U0REQUEST1>")
	})
	if _, err := e.store.Tokens().Load(context.Background(), token); !errors.Is(err, engine.ErrTokenNotFound) {
		t.Fatalf("token after discard: %v", err)
	}
	e.click("U0APPROVE1", blocks.ActionApprove, token, preview.TS)
	if eph := e.waitEphemeral("U0APPROVE1", 1); !strings.Contains(eph.Text, "unknown or has expired") {
		t.Fatalf("approve after discard: %q", eph.Text)
	}
	if len(e.replays()) != 0 || e.rabbit.Count(dlq) != 2 {
		t.Fatal("a discarded preview was replayed")
	}
}

func TestSocketModeUsesTheSameHandlers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{appToken: "xapp-1-integration"})
	src, dlq := dlqWith(e, 5)
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })
	testkit.Eventually(t, 10*time.Second, "a Socket Mode connection", e.stub.SocketConnected)

	ack, err := e.stub.SocketCommand("/dlq", "help", "U0REQUEST1", channel)
	if err != nil || !strings.Contains(string(ack), "Access control is off") {
		t.Fatalf("help ack %s, %v", ack, err)
	}
	ack, err = e.stub.SocketCommand("/dlq", "preview "+dlq, "U0REQUEST1", channel)
	if err != nil || !strings.Contains(string(ack), "Previewing") {
		t.Fatalf("preview ack %s, %v", ack, err)
	}
	preview, token := e.waitPreview(1)
	if err := e.stub.SocketClick(blocks.ActionApprove, token, "U0APPROVE1", channel, preview.TS); err != nil {
		t.Fatal(err)
	}
	e.waitProgress(preview.TS, "Finished", 60*time.Second)
	if len(e.stub.Calls("apps.connections.open")) == 0 {
		t.Fatal("Socket Mode did not open its connection through apps.connections.open")
	}
}

// TestRequestsFromAnotherTeamAreRefused: with DLQBOT_SLACK_TEAM_ID set to
// another workspace than the stand-in's, a signed HTTP command, a Socket
// Mode command and a Socket Mode click are all refused: the commands'
// acks say so, nothing is posted, no operation is recorded, and the
// broker shows the DLQ whole and no replay.
func TestRequestsFromAnotherTeamAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{appToken: "xapp-1-integration", teamID: "T0ELSEWHERE"})
	_, dlq := dlqWith(e, 3)
	testkit.Eventually(t, 10*time.Second, "a Socket Mode connection", e.stub.SocketConnected)
	if ack := e.command("U0REQUEST1", "preview "+dlq); !strings.Contains(ack, "serves another Slack workspace") {
		t.Fatalf("HTTP command from another team: %s", ack)
	}
	ack, err := e.stub.SocketCommand("/dlq", "preview "+dlq, "U0REQUEST1", channel)
	if err != nil || !strings.Contains(string(ack), "serves another Slack workspace") {
		t.Fatalf("Socket Mode command from another team: %s, %v", ack, err)
	}
	if err := e.stub.SocketClick(blocks.ActionCancel, "r_0123456789abcdef", "U0REQUEST1", channel, "1732900000.000100"); err != nil {
		t.Fatal(err)
	}
	// Even help, answered in the ack alone, is refused.
	if ack := e.command("U0REQUEST1", "help"); !strings.Contains(ack, "serves another Slack workspace") {
		t.Fatalf("help from another team: %s", ack)
	}
	if n := len(e.stub.Messages(channel)); n != 0 {
		t.Fatalf("%d messages posted for another team's requests", n)
	}
	if n := len(e.trail.Find("", audit.OpPreview, "")) + len(e.trail.Find("", audit.OpCancel, "")); n != 0 {
		t.Fatalf("%d operations recorded for another team's requests", n)
	}
	if n := e.rabbit.Count(dlq); n != 3 || len(e.replays()) != 0 {
		t.Fatalf("the DLQ holds %d of 3, %d replays", n, len(e.replays()))
	}
}
