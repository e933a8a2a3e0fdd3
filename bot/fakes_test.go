package bot_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
)

const secret = "test-signing-secret"

// fakeEngine is an engine whose preview can be held up.
type fakeEngine struct {
	hold     chan struct{} // Preview waits for it to close, when set
	calls    atomic.Int64
	mu       sync.Mutex
	replays  map[string]engine.Replay
	enqueued []string
	approved atomic.Int64
}

func (f *fakeEngine) Preview(ctx context.Context, sel engine.Selection, requester string) (*engine.Preview, error) {
	f.calls.Add(1)
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &engine.Preview{Token: "p_fake", ExpiresAt: time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		DLQ: engine.QueueInfo{Name: sel.DLQ, Exists: true}, Selection: sel.String(), Requester: requester,
		Scanned: 1, Selected: 1, Distinct: 1, Problems: []engine.Problem{},
		Messages: []engine.PreviewMessage{{Meta: engine.Meta{ID: "0123456789abcdef"}, Count: 1, Target: "orders"}}}, nil
}

func (f *fakeEngine) ApproveConfirmed(ctx context.Context, token, approver, _ string, p engine.Params, _ string) (engine.Approval, error) {
	f.calls.Add(1)
	if f.approved.Add(1) > 1 {
		return engine.Approval{}, engine.ErrTokenUsed
	}
	r := engine.Replay{ID: "r_fake", Token: token, DLQ: "orders.dlq", Approver: approver, State: engine.StateQueued, Total: 1}
	f.mu.Lock()
	f.replays[r.ID] = r
	f.mu.Unlock()
	return engine.Approval{Replay: r}, nil
}

func (f *fakeEngine) Control(ctx context.Context, id string, _ engine.ControlAction, _ string) (engine.Replay, error) {
	return f.Status(ctx, id)
}

func (f *fakeEngine) Enqueue(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.enqueued = append(f.enqueued, id)
	return nil
}

func (f *fakeEngine) Check(_ context.Context, id, label string) (engine.CheckReport, error) {
	return engine.CheckReport{ReplayID: id, Label: label}, nil
}
func (f *fakeEngine) Park(_ context.Context, id, _ string) (engine.ParkResult, error) {
	return engine.ParkResult{ReplayID: id}, nil
}
func (f *fakeEngine) Status(_ context.Context, id string) (engine.Replay, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.replays[id]
	if !ok {
		return r, engine.ErrReplayNotFound
	}
	return r, nil
}

// fakeStore implements the bot's Replays, Tokens and SlackRefs.
type fakeStore struct {
	mu      sync.Mutex
	replays map[string]engine.Replay
	refs    map[string][3]string // channel, thread, progress
	posted  map[string]bool      // tokens whose preview message was recorded
}

func (s *fakeStore) Set(_ context.Context, id, channel, thread, progress string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.refs[id]
	for i, v := range []string{channel, thread, progress} {
		if v != "" {
			cur[i] = v
		}
	}
	s.refs[id] = cur
	return nil
}

func (s *fakeStore) Refs(id string) [3]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refs[id]
}

// refsOf is the fake's SlackRefs (its Get is the Replays' one).
type refsOf struct{ s *fakeStore }

func (r refsOf) Set(ctx context.Context, id, channel, thread, progress string) error {
	return r.s.Set(ctx, id, channel, thread, progress)
}

func (r refsOf) Get(_ context.Context, id string) (string, string, string, error) {
	v := r.s.Refs(id)
	return v[0], v[1], v[2], nil
}

func (s *fakeStore) Get(_ context.Context, id string) (engine.Replay, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.replays[id]
	if !ok {
		return r, engine.ErrReplayNotFound
	}
	return r, nil
}

func (s *fakeStore) Update(_ context.Context, id string, fn func(*engine.Replay) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.replays[id]
	r.ID = id
	if err := fn(&r); err != nil {
		return err
	}
	s.replays[id] = r
	return nil
}

func (s *fakeStore) List(context.Context, int) ([]engine.Replay, error) { return nil, nil }

func (s *fakeStore) Load(_ context.Context, token string) (engine.Frozen, error) {
	if token != "p_fake" {
		return engine.Frozen{}, engine.ErrTokenNotFound
	}
	return engine.Frozen{Token: token, DLQ: "orders.dlq", Requester: "U_REQ", Total: 1, Distinct: 1, ItemTargets: []string{"orders"},
		Items: []engine.Item{{ID: "0123456789abcdef", Count: 1, Target: "orders"}}}, nil
}

// LoadHeader is Load without the items, as the store's.
func (s *fakeStore) LoadHeader(ctx context.Context, token string) (engine.Frozen, error) {
	f, err := s.Load(ctx, token)
	f.Items = nil
	return f, err
}

func (s *fakeStore) Discard(context.Context, string) error { return nil }

func (e *fakeEngine) Compare(context.Context, string) (engine.Frozen, []engine.Change, error) {
	return engine.Frozen{}, nil, nil
}

// SetMessage notes that a preview was posted, and forgets where: the bot
// remembers its own.
func (s *fakeStore) SetMessage(_ context.Context, token, _, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.posted == nil {
		s.posted = map[string]bool{}
	}
	s.posted[token] = true
	return nil
}

// previewQueued previews orders.dlq in C_OPS as U_REQ, approves the
// preview (p_fake) as U_APP once the bot has recorded it, and waits for the
// preview to show the queued replay; it returns the preview's message.
func (h *harness) previewQueued(t *testing.T) slackstub.Message {
	t.Helper()
	if _, err := h.stub.SlashCommand(h.srv.URL, "/dlq", "preview orders.dlq", "U_REQ", "C_OPS"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the preview", func() bool { return len(h.stub.Messages("C_OPS")) == 1 })
	h.previewPosted(t, "p_fake")
	preview := h.stub.Messages("C_OPS")[0]
	if _, err := h.stub.SlashCommand(h.srv.URL, "/dlq", "replay p_fake", "U_APP", "C_OPS"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the preview to show the queued replay", func() bool {
		m, _ := h.stub.Message("C_OPS", preview.TS)
		return strings.Contains(string(m.RawBlocks), blocks.BlockPreviewStatus) && strings.Contains(string(m.RawBlocks), "Queued")
	})
	return preview
}

// previewPosted waits until the bot has recorded the preview of token as
// posted: the stand-in shows the message a moment before the bot's post
// returns and the bot knows the message as the token's.
func (h *harness) previewPosted(t *testing.T, token string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, "the bot to record its preview", func() bool {
		h.store.mu.Lock()
		defer h.store.mu.Unlock()
		return h.store.posted[token]
	})
}
func (s *fakeStore) Message(context.Context, string) (string, string, error) {
	return "", "", nil
}

// harness is a bot on the stand-in with fakes behind it.
type harness struct {
	bot   *bot.Bot
	stub  *slackstub.Stub
	srv   *httptest.Server
	eng   *fakeEngine
	store *fakeStore
}

func newHarness(t *testing.T, eng *fakeEngine, mod func(*bot.Config)) *harness {
	t.Helper()
	return newPolicyHarness(t, eng, mod, nil)
}

// fakeWindows is ops.Windows in memory, for the bot's tests without Redis
// (store.Windows is tested against Redis).
type fakeWindows struct {
	mu sync.Mutex
	n  map[string]int
}

func (w *fakeWindows) Take(_ context.Context, key string, n, limit int, _ time.Duration) (ops.Take, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = map[string]int{}
	}
	used := w.n[key]
	if used+n > limit {
		return ops.Take{Used: used, RetryAfter: time.Minute}, nil
	}
	w.n[key] += n
	return ops.Take{OK: true, Used: used, ID: "x"}, nil
}

func (w *fakeWindows) Give(context.Context, string, string) error { return nil }

// newPolicyHarness is newHarness with a permissions policy (nil: access
// control off).
func newPolicyHarness(t *testing.T, eng *fakeEngine, mod func(*bot.Config), policy *commands.Policy) *harness {
	t.Helper()
	if eng == nil {
		eng = &fakeEngine{}
	}
	eng.replays = map[string]engine.Replay{}
	st := &fakeStore{replays: map[string]engine.Replay{}, refs: map[string][3]string{}}
	stub := slackstub.New(secret)
	t.Cleanup(stub.Close)
	cfg := bot.Config{SigningSecret: secret, BotToken: "xoxb-test", APIURL: stub.APIURL(), ActivityChannel: "C_ACTIVITY"}
	if mod != nil {
		mod(&cfg)
	}
	n, err := bot.NewNotifier(cfg, bot.NotifierDeps{Replays: st, Refs: refsOf{st}, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	o, err := ops.New(ops.Config{Policy: policy}, ops.Deps{Engine: eng, Tokens: st, Replays: st, Windows: &fakeWindows{}, Groups: n.UserGroups()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(n, bot.Deps{Ops: o, Tokens: st})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
	})
	return &harness{bot: b, stub: stub, srv: srv, eng: eng, store: st}
}
