package integration_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestResentSignedRequestIsRefused: a captured Resume click, sent again
// after someone paused the replay, is refused (409) within its signature's
// window and the replay stays paused: the broker's DLQ keeps what the
// paused replay had not sent. A resent slash command is refused alike.
func TestResentSignedRequestIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	src, dlq := dlqWith(e, 40)
	e.rabbit.Consume(src, func(amqp.Delivery) string { return "ack" })
	e.command("U0REQUEST1", "preview "+dlq)
	preview, token := e.waitPreview(1)
	// The list goes out once the bot has noted where the preview is, which
	// `replay <token>` needs to thread the replay under it.
	testkit.Eventually(t, 20*time.Second, "the message list file", func() bool { return len(e.stub.Files()) == 1 })
	e.command("U0APPROVE1", "replay "+token+" step=5 rate=2")
	prog := e.waitProgress(preview.TS, "Running", 20*time.Second)
	id := buttonValue(prog.RawBlocks, blocks.ActionPause)

	post := func(body []byte, at time.Time, path string) (int, string) {
		resp, err := e.stub.Post(e.srv.URL+path, "application/x-www-form-urlencoded", body, at)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	clickBody := func(action string) []byte {
		p, err := e.stub.ClickPayload(action, id, "U0APPROVE1", channel, prog.TS)
		if err != nil {
			t.Fatal(err)
		}
		return []byte(url.Values{"payload": {string(p)}}.Encode())
	}
	e.click("U0APPROVE1", blocks.ActionPause, id, prog.TS)
	e.waitProgress(preview.TS, "Paused", 20*time.Second)
	resume, at := clickBody(blocks.ActionResume), time.Now()
	if code, _ := post(resume, at, slackstub.InteractionsPath); code != http.StatusOK {
		t.Fatalf("resume: %d", code)
	}
	e.waitProgress(preview.TS, "Running", 20*time.Second)
	e.click("U0APPROVE1", blocks.ActionPause, id, prog.TS)
	e.waitProgress(preview.TS, "Paused", 20*time.Second)
	testkit.Eventually(t, 20*time.Second, "the replay to settle paused", func() bool {
		r, err := e.store.Replays().Get(t.Context(), id)
		return err == nil && r.State == engine.StatePaused
	})
	r, _ := e.store.Replays().Get(t.Context(), id)
	left := e.rabbit.Count(dlq)

	// The captured Resume, sent again.
	code, body := post(resume, at, slackstub.InteractionsPath)
	if code != http.StatusConflict || !strings.Contains(body, "already received") {
		t.Fatalf("resent resume: %d %q, want 409 naming it", code, body)
	}
	cmd := []byte(e.stub.CommandForm("/dlq", "status "+id, "U0APPROVE1", channel).Encode())
	now := time.Now()
	if code, _ := post(cmd, now, slackstub.CommandsPath); code != http.StatusOK {
		t.Fatalf("status: %d", code)
	}
	if code, _ := post(cmd, now, slackstub.CommandsPath); code != http.StatusConflict {
		t.Fatalf("resent status: %d, want 409", code)
	}
	// Nothing moved: still paused, nothing more sent, the DLQ unchanged.
	got, err := e.store.Replays().Get(t.Context(), id)
	if err != nil || got.State != engine.StatePaused || got.Sent != r.Sent {
		t.Fatalf("after the resent resume: %+v %v, want paused with %d sent", got, err, r.Sent)
	}
	if n := e.rabbit.Count(dlq); n != left || n == 0 {
		t.Fatalf("DLQ holds %d, want the %d the paused replay left", n, left)
	}
}
