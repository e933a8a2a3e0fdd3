package slackstub

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// webItem is one entry of a channel or thread on the page.
type webItem struct {
	// Key identifies the entry on the page: the message's ts, "e<n>" for
	// an ephemeral message, "n<n>" for a note.
	Key string `json:"key"`
	// Kind is "message", "ephemeral", "command" (what the user typed) or
	// "slackbot" (the stand-in's own answer).
	Kind     string          `json:"kind"`
	TS       string          `json:"ts,omitempty"`
	ThreadTS string          `json:"thread_ts,omitempty"`
	User     string          `json:"user"`
	Text     string          `json:"text"`
	Blocks   json.RawMessage `json:"blocks,omitempty"`
	Files    []webFile       `json:"files,omitempty"`
	Edits    int             `json:"edits,omitempty"`
	At       int64           `json:"at"` // Unix milliseconds
	Replies  []webItem       `json:"replies,omitempty"`
}

// webFile is a file shared in a message.
type webFile struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Title string `json:"title"`
	Size  int    `json:"size"`
	URL   string `json:"url"`
}

// webChannelState is a channel with its entries, oldest first.
type webChannelState struct {
	WebChannel
	Items []webItem `json:"items"`
}

// webSnapshot is everything the page shows.
type webSnapshot struct {
	Rev         int64             `json:"rev"`
	Team        string            `json:"team"`
	User        string            `json:"user"`
	Users       map[string]string `json:"users"`
	Command     string            `json:"command"`
	Notice      string            `json:"notice"`
	Suggestions []string          `json:"suggestions"`
	Connected   bool              `json:"connected"`
	Channels    []webChannelState `json:"channels"`
}

// webSnapshot builds the page's state (callers hold mu).
func (s *Stub) webSnapshot() webSnapshot {
	cfg := s.web.cfg
	snap := webSnapshot{Rev: s.rev, Team: cfg.Team, User: cfg.User, Users: cfg.Users, Command: cfg.Command,
		Notice: cfg.Notice, Suggestions: cfg.Suggestions, Connected: cfg.BotURL != ""}
	if snap.Team == "" {
		snap.Team = TeamName
	}
	if snap.Users == nil {
		snap.Users = map[string]string{BotUserID: "dlqbot"}
	}
	channels := append([]WebChannel(nil), cfg.Channels...)
	known := map[string]bool{}
	for _, c := range channels {
		known[c.ID] = true
	}
	var others []string
	for id := range s.channels {
		if !known[id] {
			others = append(others, id)
		}
	}
	slices.Sort(others)
	for _, id := range others {
		channels = append(channels, webChannelOf(id, cfg.User, snap.Users))
	}
	for _, c := range channels {
		snap.Channels = append(snap.Channels, webChannelState{WebChannel: c, Items: s.webItems(c.ID, cfg.User)})
	}
	return snap
}

// webChannelOf is how the page shows a conversation it was not configured
// with: a direct message the bot opened with the page's user (DMChannel)
// under the bot's name, as that user's Slack shows it (one with someone
// else under both names); another channel under its id, in lower case.
func webChannelOf(id, me string, users map[string]string) WebChannel {
	if user, ok := strings.CutPrefix(id, "D"); ok && user != "" {
		bot := cmp.Or(users[BotUserID], "dlqbot")
		if user == me {
			return WebChannel{ID: id, Name: bot, DM: true, Topic: "Direct messages from " + bot + " to you"}
		}
		name := bot + ", " + cmp.Or(users[user], user)
		return WebChannel{ID: id, Name: name, DM: true, Topic: "Direct messages: " + name}
	}
	return WebChannel{ID: id, Name: strings.ToLower(id)}
}

// webItems returns channel's top-level entries with their threads, oldest
// first: messages, user's ephemeral messages and the page's notes
// (callers hold mu).
func (s *Stub) webItems(channel, user string) []webItem {
	top := []webItem{}
	threads := map[string][]webItem{}
	for _, m := range s.channels[channel] {
		if m.deleted {
			continue
		}
		it := s.webMessage(m)
		if m.ThreadTS != "" {
			threads[m.ThreadTS] = append(threads[m.ThreadTS], it)
			continue
		}
		top = append(top, it)
	}
	for i, e := range s.ephemerals {
		if e.Channel != channel || e.User != user {
			continue
		}
		it := webItem{Key: fmt.Sprintf("e%d", i), Kind: "ephemeral", ThreadTS: e.ThreadTS, User: BotUserID,
			Text: e.Text, Blocks: e.RawBlocks, At: e.At.UnixMilli()}
		if e.ThreadTS != "" {
			if _, ok := s.byTS[channel+"/"+e.ThreadTS]; ok {
				threads[e.ThreadTS] = append(threads[e.ThreadTS], it)
				continue
			}
			it.ThreadTS = ""
		}
		top = append(top, it)
	}
	for i, n := range s.web.notes {
		if n.channel != channel {
			continue
		}
		who := BotUserID
		if n.kind == "command" {
			who = user
		}
		top = append(top, webItem{Key: fmt.Sprintf("n%d", i), Kind: n.kind, User: who, Text: n.text, At: n.at.UnixMilli()})
	}
	byTime := func(a, b webItem) int {
		if a.At != b.At {
			return int(a.At - b.At)
		}
		return strings.Compare(a.TS, b.TS)
	}
	slices.SortStableFunc(top, byTime)
	for i := range top {
		if r := threads[top[i].TS]; top[i].Kind == "message" && len(r) > 0 {
			slices.SortStableFunc(r, byTime)
			top[i].Replies = r
		}
	}
	return top
}

// webMessage renders a stored message for the page (callers hold mu).
func (s *Stub) webMessage(m *message) webItem {
	it := webItem{Key: m.TS, Kind: "message", TS: m.TS, ThreadTS: m.ThreadTS, User: BotUserID, Text: m.Text,
		Edits: len(m.EditedAt), At: m.PostedAt.UnixMilli()}
	if len(m.RawBlocks) > 0 && string(m.RawBlocks) != "null" {
		it.Blocks = m.RawBlocks
	}
	for _, f := range m.Files {
		size := len(f.Content)
		if cur := s.files[f.ID]; cur != nil {
			size = len(cur.Content)
		}
		it.Files = append(it.Files, webFile{ID: f.ID, Name: f.Name, Title: f.Title, Size: size, URL: "/ui/files/" + f.ID})
	}
	return it
}
