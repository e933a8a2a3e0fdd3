package bot_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// logBuffer is a bytes.Buffer safe for a logger and a test to share.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *logBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestTamperedSlackRefsAreNotPostedTo: the bot's record of where a replay
// shows lives in Redis, signed; when someone changes its channel there, a
// notifier that reads it (another replica, or after a restart) refuses it
// loudly (an Error line) and posts nothing into that channel, while a
// replay whose record is intact has its progress message edited.
func TestTamperedSlackRefsAreNotPostedTo(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix, SigningKey: []byte("bot-test-signing-key-0123456789abcdef")}, rdb, engine.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	stub := slackstub.New(secret)
	t.Cleanup(stub.Close)
	api := slack.New("xoxb-seed", slack.OptionAPIURL(stub.APIURL()))
	ctx := context.Background()
	seed := func(id string) (parent, progress string) {
		_, parent, err := api.PostMessage("C_OPS", slack.MsgOptionText("preview", false))
		if err != nil {
			t.Fatal(err)
		}
		_, progress, err = api.PostMessage("C_OPS", slack.MsgOptionText("progress", false), slack.MsgOptionTS(parent))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SlackRefs().Set(ctx, id, "C_OPS", parent, progress); err != nil {
			t.Fatal(err)
		}
		return parent, progress
	}
	ids := [2]string{testkit.Name("r_ok"), testkit.Name("r_tamp")}
	_, okProgress := seed(ids[0])
	tamperedParent, tamperedProgress := seed(ids[1])
	// Whoever can write Redis points the tampered replay at their channel,
	// with a message of theirs to edit there.
	_, attackTS, err := api.PostMessage("C_ATTACK", slack.MsgOptionText("bait", false))
	if err != nil {
		t.Fatal(err)
	}
	key := prefix + "{" + ids[1] + "}:slack" // store/keys.go's layout
	if err := rdb.HSet(ctx, key, "channel", "C_ATTACK", "progress_ts", attackTS, "thread_ts", attackTS).Err(); err != nil {
		t.Fatal(err)
	}

	logs := &logBuffer{}
	cfg := bot.Config{SigningSecret: secret, BotToken: "xoxb-test", APIURL: stub.APIURL()}
	fs := &fakeStore{replays: map[string]engine.Replay{}, refs: map[string][3]string{}}
	n, err := bot.NewNotifier(cfg, bot.NotifierDeps{Replays: fs, Refs: st.SlackRefs(), Log: zerolog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		fs.replays[id] = engine.Replay{ID: id}
		n.Notify(ctx, event(id, engine.EventFinished, engine.StateFinished, 100, nil))
	}
	testkit.Eventually(t, 20*time.Second, "the intact replay's progress message edited", func() bool {
		m, _ := stub.Message("C_OPS", okProgress)
		return m.Edits() > 0 && strings.Contains(m.Content(), "Finished")
	})
	testkit.Eventually(t, 20*time.Second, "an Error line about the tampered record", func() bool {
		return strings.Contains(logs.String(), `"level":"error"`) && strings.Contains(logs.String(), "signature check")
	})
	if ms := stub.Messages("C_ATTACK"); len(ms) != 1 || ms[0].Edits() != 0 || len(ms[0].Replies) != 0 {
		t.Fatalf("the attacker's channel got posts or edits: %+v", ms)
	}
	if m, _ := stub.Message("C_OPS", tamperedProgress); m.Edits() != 0 {
		t.Errorf("the tampered replay's original progress message was edited %d times", m.Edits())
	}
	if p, _ := stub.Message("C_OPS", tamperedParent); len(p.Replies) != 1 {
		t.Errorf("the tampered replay's thread has %d replies, want 1", len(p.Replies))
	}
}
