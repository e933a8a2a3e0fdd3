package slackstub

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/slack-go/slack"
)

// responseTarget is who a response_url answers.
type responseTarget struct {
	user, channel, messageTS string
	threadTS                 string // the clicked message's thread, if it is a reply
	posts                    int
}

// serveResponse records a post to a response_url.
func (s *Stub) serveResponse(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	var msg slack.WebhookMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		http.Error(w, "invalid_payload", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.responses[r.PathValue("id")]
	if !ok {
		http.Error(w, "no_such_url", http.StatusNotFound)
		return
	}
	if t.posts >= 5 {
		http.Error(w, "used_url", http.StatusNotFound)
		return
	}
	t.posts++
	var bl []slack.Block
	if msg.Blocks != nil {
		bl = msg.Blocks.BlockSet
	}
	now := time.Now()
	switch {
	case msg.ResponseType == slack.ResponseTypeInChannel:
		raw, _ := json.Marshal(bl)
		m := &message{Message: Message{Channel: t.channel, TS: s.ts(), Text: msg.Text, Blocks: bl, RawBlocks: raw, PostedAt: now}}
		s.add(m)
	case msg.ReplaceOriginal && t.messageTS != "":
		if m, ok := s.byTS[t.channel+"/"+t.messageTS]; ok {
			m.Text, m.Blocks = msg.Text, bl
			m.RawBlocks, _ = json.Marshal(bl)
			m.EditedAt = append(m.EditedAt, now)
		}
	case msg.DeleteOriginal && t.messageTS != "":
		if m, ok := s.byTS[t.channel+"/"+t.messageTS]; ok {
			m.deleted = true
		}
	default:
		var raw json.RawMessage
		if len(bl) > 0 {
			raw, _ = json.Marshal(bl)
		}
		s.ephemerals = append(s.ephemerals, Ephemeral{User: t.user, Channel: t.channel, ThreadTS: t.threadTS,
			Text: msg.Text, Blocks: bl, RawBlocks: raw, Via: "response_url", At: now})
	}
	s.touch()
	_, _ = w.Write([]byte("ok"))
}

// add stores a new message (callers hold mu).
func (s *Stub) add(m *message) {
	s.channels[m.Channel] = append(s.channels[m.Channel], m)
	s.byTS[m.Channel+"/"+m.TS] = m
}

// newResponseURL registers a response_url for a request by user in channel
// (about messageTS for a click).
func (s *Stub) newResponseURL(user, channel, messageTS string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := fmt.Sprintf("R%08d", s.nextID())
	t := &responseTarget{user: user, channel: channel, messageTS: messageTS}
	if m, ok := s.byTS[channel+"/"+messageTS]; ok {
		t.threadTS = m.ThreadTS
	}
	s.responses[id] = t
	return s.base + "/response/" + id
}
