package bot

import (
	"context"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/engine"
)

// The preview a replay was approved from is its status: the Notifier that
// runs the replay edits it to lead with the replay's state and verdict
// (blocks.PreviewStatus) each time either changes — from the preview's
// blocks when this process posted it, else from the preview the token
// store keeps (blocks.FrozenPreview) — and at the
// end posts one outcome line in the replay's channel, outside the thread.
// Every activity and outcome line links the replay's thread and, with
// Config.DashboardURL, its dashboard page.

// outcomeKinds are the events after which the channel gets its outcome line.
func outcomeEvent(k engine.EventKind) bool {
	switch k {
	case engine.EventStopped, engine.EventFinished, engine.EventCancelled, engine.EventInterrupted:
		return true
	}
	return false
}

// PreviewHeaders reads the preview behind a token without its items; the
// store's Tokens implements it.
type PreviewHeaders interface {
	LoadHeader(ctx context.Context, token string) (engine.Frozen, error)
}

// editRoot brings the preview's status line up to r, when the replay has
// a preview message apart from its progress message, and the
// state or verdict changed since the last edit. Edits are one at a time
// and never go back to an older record (the approval's own edit and the
// sender's may race).
func (fs *feeds) editRoot(ctx context.Context, f *feed, r engine.Replay) {
	nt := fs.n
	f.rootMu.Lock()
	defer f.rootMu.Unlock()
	key := string(r.State) + "/" + string(r.Verdict())
	fs.mu.Lock()
	root, shown, at, loc := f.root, f.rootKey, f.rootAt, f.loc
	fs.mu.Unlock()
	if key == shown || r.UpdatedAt.Before(at) || loc.channel == "" || loc.thread == "" || loc.thread == loc.progress {
		return
	}
	if root == nil {
		// Another replica posted the preview (or this one restarted):
		// render it from what the token store keeps. A notifier given no
		// token store leaves previews it did not post alone.
		if nt.previews == nil {
			return
		}
		root = fs.frozenRoot(ctx, f, r)
	}
	bl, text := blocks.PreviewStatus(root, r, fs.links(ctx, f, loc))
	if err := nt.update(ctx, 2, loc.channel, loc.thread, bl, text); err != nil {
		nt.log.Warn().Err(err).Str("replay_id", f.id).Msg("preview status not updated")
		return
	}
	fs.mu.Lock()
	f.rootKey, f.rootAt = key, r.UpdatedAt
	fs.mu.Unlock()
}

// frozenRoot renders r's preview from the token store, remembering it for
// the next edits; nil when it cannot be read (expired, or gone with its
// replay's retention): PreviewStatus then shows the status line and a line
// naming the replay, the status mattering more than the preview's body.
func (fs *feeds) frozenRoot(ctx context.Context, f *feed, r engine.Replay) []slack.Block {
	nt := fs.n
	if r.Token == "" {
		return nil
	}
	p, err := nt.previews.LoadHeader(ctx, r.Token)
	if err != nil {
		nt.log.Warn().Err(err).Str("replay_id", f.id).Msg("preview not read; its status line stands alone")
		return nil
	}
	root := blocks.FrozenPreview(p)
	fs.mu.Lock()
	if f.root == nil {
		f.root = root
	}
	fs.mu.Unlock()
	return root
}

// showRoot edits the preview of a replay just approved to lead with its
// status (see editRoot); false when there is no preview to edit here.
func (fs *feeds) showRoot(ctx context.Context, id string, preview []slack.Block, r engine.Replay) bool {
	if preview == nil {
		return false
	}
	fs.mu.Lock()
	f := fs.get(id)
	f.root = preview
	var latest *engine.Replay
	if f.latest != nil {
		latest = &f.latest.Replay
	}
	fs.mu.Unlock()
	// The replay may have run ahead of its approval's answer (or ended,
	// its feed gone): show the newest record known.
	if latest == nil {
		if cur, err := fs.n.replays.Get(ctx, id); err == nil {
			latest = &cur
		}
	}
	if latest != nil && latest.ID == id && !latest.UpdatedAt.Before(r.UpdatedAt) {
		r = *latest
	}
	fs.editRoot(ctx, f, r)
	if r.State.Terminal() {
		fs.mu.Lock()
		if !f.running && !f.dirty && len(f.out) == 0 && fs.m[id] == f {
			delete(fs.m, id) // ended already: no event will come to free it
		}
		fs.mu.Unlock()
	}
	return true
}

// links are where f's replay can be followed: its thread (the workspace's
// archives link with Config.WorkspaceURL, else Slack's permalink, asked
// once) and its dashboard page.
func (fs *feeds) links(ctx context.Context, f *feed, loc location) blocks.Links {
	nt := fs.n
	l := blocks.ReplayLinks(nt.cfg.WorkspaceURL, loc.channel, loc.thread, nt.cfg.DashboardURL, f.id)
	if l.Thread != "" || loc.channel == "" || loc.thread == "" {
		return l
	}
	fs.mu.Lock()
	link := f.permalink
	fs.mu.Unlock()
	if link == "" {
		err := nt.retry(ctx, "chat.getPermalink", 2, func(ctx context.Context) error {
			var err error
			link, err = nt.api.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: loc.channel, Ts: loc.thread})
			return err
		})
		if err != nil {
			nt.log.Warn().Err(err).Str("replay_id", f.id).Msg("no link to the replay's thread")
			return l
		}
		fs.mu.Lock()
		f.permalink = link
		fs.mu.Unlock()
	}
	l.Thread = link
	return l
}
