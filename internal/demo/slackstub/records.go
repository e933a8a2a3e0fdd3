package slackstub

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// Call is one Web API call as the stand-in received it.
type Call struct {
	Method string
	// Args are the form and query arguments; a JSON body's top-level
	// fields are added as strings (objects and arrays as JSON).
	Args url.Values
	// JSON is the decoded JSON body, when the call sent one.
	JSON map[string]any
	// Blocks are the parsed "blocks" argument, when present.
	Blocks []slack.Block
	// Status is the HTTP status the stand-in answered; Error the Slack
	// error code ("ratelimited", "message_not_found"), "" on success.
	Status int
	Error  string
	At     time.Time
}

// Message is a message in a channel as it stands now.
type Message struct {
	Channel  string
	TS       string
	ThreadTS string // the parent's ts for a thread reply, "" otherwise
	Text     string
	// Blocks are the current blocks (after every edit); RawBlocks their
	// JSON as the bot sent it.
	Blocks    []slack.Block
	RawBlocks json.RawMessage
	PostedAt  time.Time
	// EditedAt lists when each successful chat.update arrived.
	EditedAt []time.Time
	Files    []File
	// Replies are the thread's replies, oldest first (top-level messages
	// only).
	Replies []Message
}

// Content returns the message's text and every text of its blocks
// (headers, sections, fields, context lines, button labels), one per
// line, unescaped from JSON: what a reader sees, for assertions.
func (m Message) Content() string {
	var b strings.Builder
	b.WriteString(m.Text)
	var v any
	if json.Unmarshal(m.RawBlocks, &v) == nil {
		collectTexts(&b, v)
	}
	return b.String()
}

// collectTexts appends every "text" string under v.
func collectTexts(b *strings.Builder, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			e := x[k]
			if s, ok := e.(string); ok && k == "text" {
				b.WriteString("\n" + s)
				continue
			}
			collectTexts(b, e)
		}
	case []any:
		for _, e := range x {
			collectTexts(b, e)
		}
	}
}

// Edits is how many times the message was edited.
func (m Message) Edits() int { return len(m.EditedAt) }

// Ephemeral is a message only one user saw: a chat.postEphemeral call or an
// ephemeral response_url post.
type Ephemeral struct {
	User    string
	Channel string
	// ThreadTS is the thread the message was shown in ("" for the
	// channel): a click's answer appears in the clicked message's thread.
	ThreadTS string
	Text     string
	Blocks   []slack.Block
	// RawBlocks are the blocks' JSON (nil when there are none).
	RawBlocks json.RawMessage
	// Via is "chat.postEphemeral", "response_url", or "ack" for a slash
	// command's immediate answer (recorded when the page sent the
	// command).
	Via string
	At  time.Time
}

// File is an uploaded file.
type File struct {
	ID       string
	Name     string
	Title    string
	Channel  string
	ThreadTS string
	Comment  string
	Content  []byte
}

// message is a stored message; a deleted one is kept but not shown.
type message struct {
	Message
	deleted bool
}
