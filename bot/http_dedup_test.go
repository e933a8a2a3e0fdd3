package bot_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
)

// memSeen is bot.SeenRequests in memory (the store's, against Redis, is
// tested in package store).
type memSeen struct {
	mu   sync.Mutex
	keys map[string]bool
}

func (s *memSeen) FirstSeen(_ context.Context, key string, _ time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys[key] {
		return false, nil
	}
	s.keys[key] = true
	return true, nil
}

// TestResentRequestWithUpperCaseSignatureIsRefused: a captured signed
// slash command sent again with its signature's hex in upper case (which
// Slack's verifier accepts) is the same request: refused 409, and the
// preview is asked for once.
func TestResentRequestWithUpperCaseSignatureIsRefused(t *testing.T) {
	t.Parallel()
	eng := &fakeEngine{replays: map[string]engine.Replay{}}
	st := &fakeStore{replays: map[string]engine.Replay{}, refs: map[string][3]string{}}
	stub := slackstub.New(secret)
	t.Cleanup(stub.Close)
	cfg := bot.Config{SigningSecret: secret, BotToken: "xoxb-test", APIURL: stub.APIURL(), ActivityChannel: "C_ACTIVITY"}
	n, err := bot.NewNotifier(cfg, bot.NotifierDeps{Replays: st, Refs: refsOf{st}, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	trail := &testkit.Trail{}
	o, err := ops.New(ops.Config{}, ops.Deps{Engine: eng, Tokens: st, Replays: st, Windows: &fakeWindows{}, Groups: n.UserGroups(), Audit: trail})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(n, bot.Deps{Ops: o, Tokens: st, Seen: &memSeen{keys: map[string]bool{}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(b.Handler())
	t.Cleanup(hs.Close)
	srv := hs.URL
	body := []byte(stub.CommandForm("/dlq", "preview orders.dlq", "U_REQ", "C_OPS").Encode())
	at := time.Now()
	send := func(sig string) int {
		req, err := http.NewRequest(http.MethodPost, srv+slackstub.CommandsPath, strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", form)
		req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(at.Unix(), 10))
		req.Header.Set("X-Slack-Signature", sig)
		resp, err := do(req)
		return status(t, resp, err)
	}
	sig := slackstub.Sign(secret, at.Unix(), body)
	if code := send(sig); code != http.StatusOK {
		t.Fatalf("first arrival: %d, want 200", code)
	}
	upper := "v0=" + strings.ToUpper(strings.TrimPrefix(sig, "v0="))
	if code := send(upper); code != http.StatusConflict {
		t.Fatalf("the same request with its signature in upper case: %d, want 409", code)
	}
	testkit.Eventually(t, 10*time.Second, "the preview asked for", func() bool { return eng.calls.Load() >= 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.Shutdown(ctx) // waits for the requests' background work
	if n := eng.calls.Load(); n != 1 {
		t.Fatalf("engine called %d times, want once", n)
	}
	dups := trail.Find("slack", audit.OpSlackRequest, audit.OutcomeRefused)
	if len(dups) != 1 || dups[0].Code != "duplicate" {
		t.Fatalf("duplicate-request audit entries %+v, want one", dups)
	}
}
