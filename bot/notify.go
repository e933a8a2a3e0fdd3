package bot

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/engine"
)

// location is where a replay shows in Slack: the channel, the thread (the
// preview's ts) and the progress message in it.
type location struct {
	channel, thread, progress string
}

// merge fills what l lacks from o.
func (l *location) merge(o location) {
	if l.channel == "" || (o.channel != "" && o.channel != l.channel) {
		*l = o
		return
	}
	if o.thread != "" {
		l.thread = o.thread
	}
	if o.progress != "" {
		l.progress = o.progress
	}
}

// Notify implements engine.Notifier. It never blocks on Slack: the event is
// queued for the replay's sender goroutine, which edits the progress
// message (at most once per EditInterval, latest state first), posts the
// step reply in the thread and the activity line. Follow-up checks post
// their report in the thread and a line in the activity channel; parking
// posts a line in both. Every line meant for the activity channel is
// posted only when the policy allows the replay's DLQ there (showwhere.go).
func (n *Notifier) Notify(_ context.Context, e engine.Event) {
	if e.Replay.ID == "" {
		return
	}
	n.feeds.push(detach(e))
}

// detach copies what an event points to: the engine goes on writing its
// step result and failure list after emitting, while the event waits here.
func detach(e engine.Event) engine.Event {
	if e.Step != nil {
		st := *e.Step
		e.Step = &st
	}
	if e.Check != nil {
		c := *e.Check
		c.Groups = slices.Clone(c.Groups)
		c.ParkIDs = slices.Clone(c.ParkIDs)
		e.Check = &c
	}
	e.Replay.Failures = slices.Clone(e.Replay.Failures)
	return e
}

// Limits of a replay's queue of posts while Slack is slow or down.
const (
	maxOutbox    = 200
	postAttempts = 8
)

// outPost is one thread reply or activity line waiting to be sent.
type outPost struct {
	activity bool
	// outcome is the one line posted in the replay's channel, outside
	// its thread, when it stops or ends (outcome.go).
	outcome bool
	// final marks an activity line of a stop or an end: not posted when
	// the activity channel is the replay's own, whose outcome line says it.
	final  bool
	blocks []slack.Block // nil for a plain mrkdwn line
	text   string
}

// feed is one replay's queue of Slack updates.
type feed struct {
	id       string
	dlq      string // the replay's DLQ, whose channel allowlist applies
	loc      location
	latest   *engine.Event // the state the progress message should show
	dirty    bool          // latest not shown yet
	lastEdit time.Time
	out      []outPost
	running  bool // a sender goroutine serves it
	final    bool // a terminal event was queued
	// root is the preview the replay was approved from, as rendered (nil
	// when not known here); rootKey the state and verdict it last showed.
	root      []slack.Block
	rootKey   string
	rootAt    time.Time  // the record's UpdatedAt it last showed
	rootMu    sync.Mutex // one edit of the preview at a time
	permalink string     // the thread's Slack permalink, once asked
}

// feeds holds every replay's feed.
type feeds struct {
	n  *Notifier
	mu sync.Mutex
	m  map[string]*feed
}

func newFeeds(n *Notifier) *feeds { return &feeds{n: n, m: map[string]*feed{}} }

// get returns id's feed, creating it (callers hold mu).
func (fs *feeds) get(id string) *feed {
	f := fs.m[id]
	if f == nil {
		f = &feed{id: id}
		fs.m[id] = f
	}
	return f
}

// remember records where a replay shows, before its first event.
func (fs *feeds) remember(id string, loc location) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.get(id).loc.merge(loc)
}

func (fs *feeds) push(e engine.Event) {
	nt := fs.n
	posts, state := eventPosts(e, nt.cfg.ActivityChannel != "", nt.cfg.CommandName)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f := fs.get(e.Replay.ID)
	if e.Replay.DLQ != "" {
		f.dlq = e.Replay.DLQ
	}
	if state {
		ev := e
		f.latest, f.dirty = &ev, true
		f.final = f.final || e.Replay.State.Terminal()
	}
	f.out = append(f.out, posts...)
	if n := len(f.out) - maxOutbox; n > 0 {
		nt.log.Warn().Str("replay_id", f.id).Int("dropped", n).Msg("slack is behind: oldest thread replies dropped")
		f.out = append([]outPost(nil), f.out[n:]...)
	}
	if !f.running && (f.dirty || len(f.out) > 0) {
		f.running = nt.spawn(func() { fs.serve(f) })
	}
}

// eventPosts returns what an event posts in the thread and the activity
// channel, and whether it changes what the progress message shows
// (follow-up checks and parking do not).
func eventPosts(e engine.Event, activity bool, command string) ([]outPost, bool) {
	var out []outPost
	switch e.Kind {
	case engine.EventFollowUp:
		if e.Check == nil {
			return nil, false
		}
		// Posted in the replay's thread: a whole channel sees it, so each
		// failure group shows as its type and id; the check command
		// answers a reader with the texts, privately.
		bl, text := blocks.Check(*e.Check, blocks.ChannelView)
		out = append(out, outPost{blocks: bl, text: text})
		if activity {
			out = append(out, outPost{activity: true, text: blocks.ActivityCheck(*e.Check)})
		}
		return out, false
	case engine.EventParked:
		line := ":parking: " + blocks.EscapeKeepCode(e.Text)
		if e.Actor != "" {
			line += " — by " + blocks.Who(e.Actor)
		}
		out = append(out, outPost{text: line})
		if activity {
			out = append(out, outPost{activity: true, text: line})
		}
		return out, false
	}
	if s := blocks.StepReplyAs(command, e); s != "" {
		out = append(out, outPost{text: s})
	}
	final := outcomeEvent(e.Kind)
	if activity {
		if s := blocks.Activity(e); s != "" {
			out = append(out, outPost{activity: true, final: final, text: s})
		}
	}
	if final {
		out = append(out, outPost{outcome: true, text: blocks.OutcomeLine(e.Replay, blocks.Links{})})
	}
	return out, true
}

// serve sends f's queued updates until none are left.
func (fs *feeds) serve(f *feed) {
	ctx := fs.n.ctx
	for {
		fs.mu.Lock()
		if (len(f.out) == 0 && !f.dirty) || ctx.Err() != nil {
			f.running = false
			if f.final && len(f.out) == 0 && !f.dirty {
				delete(fs.m, f.id)
			}
			fs.mu.Unlock()
			return
		}
		out := f.out
		f.out = nil
		fs.mu.Unlock()
		loc := fs.locate(ctx, f)
		for _, p := range out {
			fs.send(ctx, f, loc, p)
		}
		fs.edit(ctx, f)
	}
}

// locate returns where f's replay shows, reading the bot's record when
// this process does not know yet (another replica approved it).
func (fs *feeds) locate(ctx context.Context, f *feed) location {
	fs.mu.Lock()
	loc := f.loc
	fs.mu.Unlock()
	if loc.channel != "" && loc.progress != "" {
		return loc
	}
	channel, thread, progress, err := fs.n.refs.Get(ctx, f.id)
	switch {
	case errors.Is(err, engine.ErrBadSignature):
		// Changed in Redis: what it names is not where this replay was
		// approved, and nothing is posted there.
		fs.n.log.Error().Err(err).Str("replay_id", f.id).Msg("refused the record of where the replay shows in Slack: it failed its signature check; nothing is posted where it points")
	case err != nil:
		fs.n.log.Warn().Err(err).Str("replay_id", f.id).Msg("could not read where the replay shows in Slack")
	}
	if err != nil || channel == "" {
		return loc
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f.loc.merge(location{channel: channel, thread: thread, progress: progress})
	return f.loc
}

// send posts one thread reply or activity line.
func (fs *feeds) send(ctx context.Context, f *feed, loc location, p outPost) {
	nt := fs.n
	channel, thread := loc.channel, loc.thread
	fs.mu.Lock()
	dlq := f.dlq // push sets it under mu
	fs.mu.Unlock()
	if p.activity || p.outcome {
		if p.outcome && (channel == "" || thread == "" || !nt.showable(dlq, channel)) {
			return // a replay shown nowhere, or where the policy does not allow its DLQ
		}
		if p.activity {
			if p.final && nt.cfg.ActivityChannel == channel {
				return // the replay's channel gets its outcome line
			}
			if channel = nt.activityChannel(dlq); channel == "" {
				nt.log.Info().Str("replay_id", f.id).Str("dlq", dlq).Str("channel", nt.cfg.ActivityChannel).
					Msg("activity line not posted: the policy does not allow the replay's DLQ in the activity channel")
				return
			}
		}
		p.text += fs.links(ctx, f, loc).Text()
		thread = ""
	} else if channel == "" || thread == "" {
		return // a replay started outside Slack has no thread
	} else if !nt.showable(dlq, channel) {
		return // recorded where the policy does not allow its DLQ (see showwhere.go)
	}
	if _, err := nt.post(ctx, postAttempts, channel, thread, p.blocks, p.text); err != nil {
		nt.log.Error().Err(err).Str("replay_id", f.id).Bool("activity", p.activity).Msg("slack post dropped")
	}
}

// edit brings the progress message up to the latest state, no sooner
// than EditInterval after Slack answered the previous edit, retrying (with the newest
// state each time) until it succeeds, fails for good or the bot stops.
func (fs *feeds) edit(ctx context.Context, f *feed) {
	nt := fs.n
	for attempt := 0; ; attempt++ {
		fs.mu.Lock()
		if !f.dirty {
			fs.mu.Unlock()
			return
		}
		wait := time.Until(f.lastEdit.Add(nt.cfg.EditInterval))
		fs.mu.Unlock()
		if !sleepCtx(ctx, wait) {
			return
		}
		fs.mu.Lock()
		ev, loc := *f.latest, f.loc
		f.dirty = false
		f.lastEdit = time.Now()
		fs.mu.Unlock()
		if loc.channel == "" || !nt.showable(ev.Replay.DLQ, loc.channel) {
			return // nowhere to show it: a replay started outside Slack, or a channel the policy does not allow
		}
		bl, text := blocks.ProgressEventAs(nt.cfg.CommandName, ev)
		var err error
		if loc.progress == "" {
			err = fs.postProgress(ctx, f, loc, bl, text)
		} else {
			err = nt.update(ctx, 1, loc.channel, loc.progress, bl, text)
		}
		// The next edit waits from the answer, not the request: Slack has
		// then received this one, so it sees two edits EditInterval apart
		// however long this one took on the way.
		fs.mu.Lock()
		f.lastEdit = time.Now()
		fs.mu.Unlock()
		if err == nil {
			fs.editRoot(ctx, f, ev.Replay)
			return
		}
		fs.mu.Lock()
		f.dirty = true // not shown: whatever is latest goes next
		fs.mu.Unlock()
		if gone(err) {
			// Someone deleted the progress message: post a new one.
			nt.log.Warn().Str("replay_id", f.id).Msg("progress message gone; posting it again")
			fs.mu.Lock()
			f.loc.progress = ""
			fs.mu.Unlock()
			continue
		}
		retryIn, ok := retryWait(err, attempt)
		if !ok {
			nt.log.Error().Err(err).Str("replay_id", f.id).Msg("progress message not updated")
			fs.mu.Lock()
			f.dirty = false
			fs.mu.Unlock()
			return
		}
		nt.log.Warn().Err(err).Str("replay_id", f.id).Dur("retry_in", retryIn).Msg("progress edit failed; retrying with the latest state")
		if !sleepCtx(ctx, retryIn-nt.cfg.EditInterval) {
			return
		}
	}
}

// postProgress posts a progress message the approval could not post, and
// records it.
func (fs *feeds) postProgress(ctx context.Context, f *feed, loc location, bl []slack.Block, text string) error {
	nt := fs.n
	ts, err := nt.post(ctx, 1, loc.channel, loc.thread, bl, text)
	if err != nil {
		return err
	}
	fs.mu.Lock()
	f.loc.progress = ts
	if f.loc.thread == "" {
		f.loc.thread = ts
	}
	where := f.loc
	fs.mu.Unlock()
	nt.record(ctx, f.id, where)
	return nil
}

// sleepCtx waits d (nothing when d ≤ 0); false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// gone reports whether err says the message to edit no longer exists.
func gone(err error) bool {
	var se slack.SlackErrorResponse
	return errors.As(err, &se) && (se.Err == "message_not_found" || se.Err == "cant_update_message")
}
