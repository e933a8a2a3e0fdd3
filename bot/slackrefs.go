package bot

import (
	"context"
	"sync"
)

// SlackRefs records where each replay shows in Slack: its channel, its
// thread (the preview's ts) and its progress message. It is the bot's own
// record, kept apart from the engine's fenced replay record, so that the
// replay's owner and the bot never overwrite each other's writes; every
// replica reads it to find a replay another one approved. The store's
// SlackRefs implements it. Set leaves recorded values where it is given
// empty ones.
type SlackRefs interface {
	Set(ctx context.Context, id, channel, thread, progress string) error
	Get(ctx context.Context, id string) (channel, thread, progress string, err error)
}

// memRefs is the SlackRefs of a notifier given none: this process alone
// knows where its replays show.
type memRefs struct {
	mu sync.Mutex
	m  map[string]location
}

func (r *memRefs) Set(_ context.Context, id, channel, thread, progress string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]location{}
	}
	loc := r.m[id]
	loc.merge(location{channel: channel, thread: thread, progress: progress})
	r.m[id] = loc
	return nil
}

func (r *memRefs) Get(_ context.Context, id string) (string, string, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	loc := r.m[id]
	return loc.channel, loc.thread, loc.progress, nil
}

// record keeps where replay id shows, logging a failure (the replay runs
// all the same; another replica then starts a thread of its own).
func (n *Notifier) record(ctx context.Context, id string, where location) {
	if err := n.refs.Set(ctx, id, where.channel, where.thread, where.progress); err != nil {
		n.log.Warn().Err(err).Str("replay_id", id).Msg("could not record where the replay shows in Slack")
	}
}
