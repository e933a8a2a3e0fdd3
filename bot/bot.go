package bot

import (
	"context"
	"errors"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// Replays reads a replay's newest record for the Notifier (a replay may
// run ahead of its approval's answer); the store's Replays implements it.
type Replays interface {
	Get(ctx context.Context, id string) (engine.Replay, error)
}

// Tokens reads and discards frozen previews and records where each was
// posted, for every replica; the store's Tokens implements it.
type Tokens interface {
	// LoadHeader reads a preview without its items (what permission
	// checks and summaries need).
	LoadHeader(ctx context.Context, token string) (engine.Frozen, error)
	Discard(ctx context.Context, token string) error
	// SetMessage records the Slack message a preview was posted as;
	// Message returns it ("" when none was recorded).
	SetMessage(ctx context.Context, token, channel, ts string) error
	Message(ctx context.Context, token string) (channel, ts string, err error)
}

// SeenRequests remembers accepted signed Slack requests across replicas
// (the store's SlackRequests implements it): FirstSeen records key (a
// request's name: its timestamp and body hash, or a Socket Mode
// envelope's id) for ttl and reports whether it was new.
type SeenRequests interface {
	FirstSeen(ctx context.Context, key string, ttl time.Duration) (bool, error)
}

// Deps are the bot's collaborators.
type Deps struct {
	// Ops are the operations every front end calls; the bot only turns
	// Slack's requests into them and words their outcome.
	Ops    *ops.Ops
	Tokens Tokens
	// Seen refuses a signed request that arrives a second time within its
	// signature's window; nil keeps no record (every replica of serve has
	// the store's).
	Seen SeenRequests
}

// Observer is told about Slack API calls (the metrics package has one).
type Observer interface {
	SlackCall(method string, err error)
	SlackRetry(method string)
}

// Bot is the Slack side of dlqbot: the commands and buttons, on top of the
// Notifier it was built on (its Slack client, configuration and senders).
// It is safe for concurrent use.
type Bot struct {
	*Notifier
	d     Deps
	slots chan struct{}

	previews *ops.PreviewCache[previewMsg]
	snoozer  Snoozer // the watch's Snooze (alerts.go); nil without a watch
}

// New returns a Bot that answers through n, which the engine may already
// notify (the engine needs the notifier and the bot needs the engine, so
// the notifier comes first). It calls nothing on Slack.
func New(n *Notifier, d Deps) (*Bot, error) {
	switch {
	case n == nil:
		return nil, errors.New("bot: new: a notifier is required")
	case d.Ops == nil || d.Tokens == nil:
		return nil, errors.New("bot: new: operations and tokens are required")
	}
	b := &Bot{
		Notifier: n,
		d:        d,
		slots:    make(chan struct{}, n.cfg.MaxInFlight),
		previews: newPreviewCache(),
	}
	if pol := d.Ops.Policy(); pol != nil {
		n.allowed = func(dlq, channel string) bool { return pol.CheckChannel(dlq, channel) == nil }
	}
	return b, nil
}

// AccessControl reports whether a permissions policy is loaded.
func (b *Bot) AccessControl() bool { return b.d.Ops.AccessControl() }
