package bot

import (
	"github.com/stroma/dlqbot/commands"

	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.Notifier = (*Notifier)(nil)

// Notifier posts replays' progress to Slack: it implements engine.Notifier
// (see notify.go) and owns what every Slack call needs: the Web API client,
// the configuration, and the goroutines that send, which Shutdown waits
// for. It is built before the engine, which it is given to as a notifier;
// the Bot is then built on it and the engine.
type Notifier struct {
	cfg      Config
	api      *slack.Client
	log      zerolog.Logger
	now      func() time.Time
	replays  Replays
	refs     SlackRefs
	previews PreviewHeaders
	observer Observer

	ctx     context.Context // lives until Shutdown
	cancel  context.CancelFunc
	mu      sync.Mutex
	closing bool
	work    sync.WaitGroup // request work and notification senders

	feeds  *feeds
	groups commands.UserGroups
	// holds keeps each Slack method's Retry-After for every caller
	// (ratehold.go).
	holds methodHolds
	// allowed tells whether a replay of a DLQ may be shown in a channel
	// (the policy's channel allowlist; see showwhere.go); nil allows all.
	// New sets it from the operations layer's policy.
	allowed func(dlq, channel string) bool
}

// NotifierDeps are the notifier's collaborators.
type NotifierDeps struct {
	// Replays tells where a replay shows in Slack (another replica may have
	// approved it); required.
	Replays Replays
	// Refs records where each replay shows in Slack, for every replica;
	// nil keeps it in this process only.
	Refs SlackRefs
	// Previews reads the preview behind a replay's token, so that a
	// replica that did not post the preview can still edit it to show the
	// replay's status (outcome.go); nil leaves previews another replica
	// posted as they are.
	Previews PreviewHeaders
	Log      zerolog.Logger
	// Now tells the time; nil means time.Now.
	Now func() time.Time
	// Observer, when set, is told about every Slack API call and retry
	// (for metrics).
	Observer Observer
	// Groups tells a user's Slack user groups; nil means Slack's
	// usergroups.list, cached for Config.GroupsTTL. The operations layer
	// asks it only when the policy names user groups.
	Groups commands.UserGroups
}

// NewNotifier validates cfg and deps and returns a Notifier. It calls
// nothing on Slack.
func NewNotifier(cfg Config, d NotifierDeps) (*Notifier, error) {
	cfg = cfg.withDefaults()
	switch {
	case cfg.BotToken == "":
		return nil, errors.New("bot: new: a bot token (SLACK_BOT_TOKEN) is required")
	case d.Replays == nil:
		return nil, errors.New("bot: new: replays are required")
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
	n := &Notifier{
		cfg:      cfg,
		api:      slack.New(cfg.BotToken, opts...),
		log:      d.Log.With().Str("component", "bot").Logger(),
		now:      d.Now,
		replays:  d.Replays,
		refs:     d.Refs,
		previews: d.Previews,
		observer: d.Observer,
	}
	if n.refs == nil {
		n.refs = &memRefs{}
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.feeds = newFeeds(n)
	n.groups = d.Groups
	if n.groups == nil {
		n.groups = commands.NewCachedGroups(&slackGroups{api: n.api, ttl: cfg.GroupsTTL, now: n.now}, cfg.GroupsTTL, n.now)
	}
	return n, nil
}

// Shutdown waits for in-flight requests and queued notifications to be
// sent until ctx ends, then stops whatever is left. Call it after the
// engine's workers have stopped, so their last events are delivered.
func (n *Notifier) Shutdown(ctx context.Context) error {
	n.mu.Lock()
	n.closing = true
	n.mu.Unlock()
	done := make(chan struct{})
	go func() {
		n.work.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.New("bot: shutdown: gave up on unsent Slack messages")
	}
	n.cancel()
	<-done
	return err
}

// spawn runs fn in a goroutine that Shutdown waits for; it returns false,
// without running fn, once Shutdown has begun.
func (n *Notifier) spawn(fn func()) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closing {
		return false
	}
	n.work.Add(1)
	go func() {
		defer n.work.Done()
		fn()
	}()
	return true
}
