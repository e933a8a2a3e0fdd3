package bot

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// Engine is what the bot asks of the engine; *engine.Service implements
// it.
type Engine interface {
	Preview(ctx context.Context, sel engine.Selection, requester string) (*engine.Preview, error)
	Approve(ctx context.Context, token, approver string, p engine.Params, confirmed bool) (engine.Approval, error)
	Pause(ctx context.Context, id, by string) (engine.Replay, error)
	Resume(ctx context.Context, id, by string, jobs engine.Jobs) (engine.Replay, error)
	Cancel(ctx context.Context, id, by string) (engine.Replay, error)
	Status(ctx context.Context, id string) (engine.Replay, error)
	Check(ctx context.Context, replayID, label string) (engine.CheckReport, error)
	Park(ctx context.Context, replayID, by string) (engine.ParkResult, error)
}

// Replays reads and annotates replay records; the store's Replays
// implements it. Update changes a record whoever owns the replay.
type Replays interface {
	Get(ctx context.Context, id string) (engine.Replay, error)
	Update(ctx context.Context, id string, fn func(*engine.Replay) error) error
	List(ctx context.Context, n int) ([]engine.Replay, error)
}

// Tokens reads and discards frozen previews and records where each was
// posted, for every replica; the store's Tokens implements it.
type Tokens interface {
	Load(ctx context.Context, token string) (engine.Frozen, error)
	Discard(ctx context.Context, token string) error
	// SetMessage records the Slack message a preview was posted as;
	// Message returns it ("" when none was recorded).
	SetMessage(ctx context.Context, token, channel, ts string) error
	Message(ctx context.Context, token string) (channel, ts string, err error)
}

// Deps are the bot's collaborators.
type Deps struct {
	Engine  Engine
	Jobs    engine.Jobs
	Replays Replays
	Tokens  Tokens
	// Groups tells a user's Slack user groups; nil means Slack's
	// usergroups.list, cached for Config.GroupsTTL. It is only asked when
	// the policy names user groups.
	Groups commands.UserGroups
	Log    zerolog.Logger
	// Now tells the time; nil means time.Now.
	Now func() time.Time
	// Observer, when set, is told about every Slack API call and retry
	// (for metrics).
	Observer Observer
}

// Observer is told about Slack API calls (the metrics package has one).
type Observer interface {
	SlackCall(method string, err error)
	SlackRetry(method string)
}

// Bot is the Slack side of dlqbot. It is safe for concurrent use.
type Bot struct {
	cfg    Config
	d      Deps
	api    *slack.Client
	log    zerolog.Logger
	now    func() time.Time
	groups commands.UserGroups

	ctx     context.Context // lives until Shutdown
	cancel  context.CancelFunc
	mu      sync.Mutex
	closing bool
	work    sync.WaitGroup // request work and notification senders
	slots   chan struct{}

	previews *previewCache
	feeds    *feeds
}

// New validates cfg and deps and returns a Bot. It calls nothing on Slack.
func New(cfg Config, d Deps) (*Bot, error) {
	cfg = cfg.withDefaults()
	switch {
	case cfg.BotToken == "":
		return nil, errors.New("bot: new: a bot token (SLACK_BOT_TOKEN) is required")
	case d.Engine == nil || d.Jobs == nil || d.Replays == nil || d.Tokens == nil:
		return nil, errors.New("bot: new: engine, jobs, replays and tokens are required")
	case !strings.HasPrefix(cfg.CommandName, "/") || strings.ContainsAny(cfg.CommandName, " \t\n"):
		return nil, errors.New("bot: new: the command name must start with / and have no spaces, like /dlq")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	opts := []slack.Option{slack.OptionAPIURL(cfg.APIURL), slack.OptionHTTPClient(cfg.HTTPClient)}
	if cfg.AppToken != "" {
		opts = append(opts, slack.OptionAppLevelToken(cfg.AppToken))
	}
	b := &Bot{
		cfg:      cfg,
		d:        d,
		api:      slack.New(cfg.BotToken, opts...),
		log:      d.Log.With().Str("component", "bot").Logger(),
		now:      d.Now,
		slots:    make(chan struct{}, cfg.MaxInFlight),
		previews: newPreviewCache(),
	}
	b.groups = d.Groups
	if b.groups == nil {
		b.groups = commands.NewCachedGroups(&slackGroups{api: b.api, ttl: cfg.GroupsTTL, now: d.Now}, cfg.GroupsTTL, d.Now)
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.feeds = newFeeds(b)
	return b, nil
}

// AccessControl reports whether a permissions policy is loaded.
func (b *Bot) AccessControl() bool { return b.cfg.Policy != nil }

// Shutdown waits for in-flight requests and queued notifications to be
// sent until ctx ends, then stops whatever is left. Call it after the
// engine's workers have stopped, so their last events are delivered.
func (b *Bot) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	done := make(chan struct{})
	go func() {
		b.work.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.New("bot: shutdown: gave up on unsent Slack messages")
	}
	b.cancel()
	<-done
	return err
}

// spawn runs fn in a goroutine that Shutdown waits for; it returns false,
// without running fn, once Shutdown has begun.
func (b *Bot) spawn(fn func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return false
	}
	b.work.Add(1)
	go func() {
		defer b.work.Done()
		fn()
	}()
	return true
}
