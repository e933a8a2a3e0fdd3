package slackstub

import (
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// The page: plain HTML, CSS and JavaScript, no build step.
//
//go:embed static
var staticFiles embed.FS

// WebConfig describes what the stand-in's page shows and who uses it: the
// page (GET / on the stand-in) shows channels with their messages,
// threads and the user's ephemeral messages, takes slash commands and
// forwards button clicks to the bot, signed like Slack.
type WebConfig struct {
	// Team is the workspace's name in the sidebar; default TeamName.
	Team string
	// BotURL is the bot's base URL: commands go to BotURL+CommandsPath,
	// clicks to BotURL+InteractionsPath. Without it the page only shows.
	BotURL string
	// Command is the slash command the page accepts; default "/dlq".
	Command string
	// User is the user id (U…) of whoever types on the page; UserName the
	// name shown for it. Defaults "U0DEMOUSER" and "you".
	User, UserName string
	// Channels are listed in the sidebar, the first one open. A channel
	// the bot posts to that is not listed is added under its id.
	Channels []WebChannel
	// Users names user ids in mentions (<@U…>); the bot's is known.
	Users map[string]string
	// Notice is a line of mrkdwn above the channel: what this page is.
	Notice string
	// Suggestions are commands offered under the input, filled in on a
	// click.
	Suggestions []string
}

// WebChannel is a channel of the page.
type WebChannel struct {
	ID    string `json:"id"`    // C…, as the bot posts to it
	Name  string `json:"name"`  // without "#"
	Topic string `json:"topic"` // plain text in the channel's header
	Intro string `json:"intro"` // mrkdwn shown at the top of the channel
	// DM is set for a direct message (an id "D" + the user's): the page
	// shows it under the person's name, not as a "#" channel.
	DM bool `json:"dm,omitempty"`
}

// webState is the page's part of the stand-in (guarded by Stub.mu).
type webState struct {
	cfg    WebConfig
	notes  []webNote
	closed bool
}

// webNote is something only the page shows: the command the user typed
// (kind "command") or the stand-in's own answer to it ("slackbot"), as
// Slack shows "/foo is not a valid command".
type webNote struct {
	kind, channel, text string
	at                  time.Time
}

// SetWeb configures the page; it may be called again at any time.
func (s *Stub) SetWeb(c WebConfig) {
	if c.Team == "" {
		c.Team = TeamName
	}
	if c.Command == "" {
		c.Command = "/dlq"
	}
	if c.User == "" {
		c.User = "U0DEMOUSER"
	}
	if c.UserName == "" {
		c.UserName = "you"
	}
	users := map[string]string{BotUserID: "dlqbot", c.User: c.UserName}
	for id, name := range c.Users {
		users[id] = name
	}
	c.Users = users
	c.Channels = append([]WebChannel(nil), c.Channels...)
	c.Suggestions = append([]string(nil), c.Suggestions...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.web.cfg = c
	s.touch()
}

// routeWeb adds the page's routes to mux.
func (s *Stub) routeWeb(mux *http.ServeMux) {
	static, _ := fs.Sub(staticFiles, "static")
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	})
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /ui/state", s.serveWebState)
	mux.HandleFunc("POST /ui/command", s.serveWebCommand)
	mux.HandleFunc("POST /ui/click", s.serveWebClick)
	mux.HandleFunc("GET /ui/files/{id}", s.serveWebFile)
}

// webPollWait is how long a read of the page's state waits for a change.
const webPollWait = 20 * time.Second

// serveWebState answers the page's state as JSON once it differs from
// revision ?rev= (at once when it already does), or after webPollWait:
// the page reads it in a loop, so edits appear as they happen.
func (s *Stub) serveWebState(w http.ResponseWriter, r *http.Request) {
	var since int64 = -1
	fmt.Sscan(r.URL.Query().Get("rev"), &since)
	timeout := time.NewTimer(webPollWait)
	defer timeout.Stop()
	for {
		s.mu.Lock()
		if s.rev != since || s.web.closed {
			st := s.webSnapshot()
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, st)
			return
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-timeout.C:
			since = -1 // answer the same state: the page asks again
		case <-r.Context().Done():
			return
		}
	}
}

// serveWebCommand sends what the user typed as a signed slash command
// and shows the bot's immediate answer as Slack does.
func (s *Stub) serveWebCommand(w http.ResponseWriter, r *http.Request) {
	var req struct{ Channel, Text string }
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil || req.Channel == "" {
		writeJSON(w, http.StatusBadRequest, obj{"ok": false, "error": "want {channel, text}"})
		return
	}
	cfg := s.webConfig()
	text := strings.TrimSpace(req.Text)
	command, rest, _ := strings.Cut(text, " ")
	switch {
	case text == "":
		writeJSON(w, http.StatusOK, obj{"ok": true})
		return
	case !strings.HasPrefix(text, "/"):
		s.addNote("slackbot", req.Channel, fmt.Sprintf("This stand-in takes slash commands only: try `%s help`.", cfg.Command))
		writeJSON(w, http.StatusOK, obj{"ok": true})
		return
	case command != cfg.Command:
		s.addNote("slackbot", req.Channel, fmt.Sprintf("`%s` is not a valid command. In this stand-in only `%s` is.", command, cfg.Command))
		writeJSON(w, http.StatusOK, obj{"ok": true})
		return
	case cfg.BotURL == "":
		writeJSON(w, http.StatusServiceUnavailable, obj{"ok": false, "error": "no bot is connected to this page"})
		return
	}
	s.addNote("command", req.Channel, text)
	resp, err := s.SlashCommand(cfg.BotURL, command, strings.TrimSpace(rest), cfg.User, req.Channel)
	if err != nil {
		s.addNote("slackbot", req.Channel, fmt.Sprintf("`%s` failed with the error \"dispatch_failed\": %s", command, err))
		writeJSON(w, http.StatusOK, obj{"ok": false, "error": err.Error()})
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		s.addNote("slackbot", req.Channel, fmt.Sprintf("`%s` failed: the app answered HTTP %d (%s)", command, resp.StatusCode, strings.TrimSpace(string(body))))
		writeJSON(w, http.StatusOK, obj{"ok": false, "error": resp.Status})
		return
	}
	s.recordAck(cfg.User, req.Channel, body)
	writeJSON(w, http.StatusOK, obj{"ok": true})
}

// recordAck shows a slash command's immediate answer: nothing for an
// empty ack, a message for in_channel, an ephemeral message otherwise.
func (s *Stub) recordAck(user, channel string, body []byte) {
	if len(strings.TrimSpace(string(body))) == 0 {
		return
	}
	var msg slack.WebhookMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		msg = slack.WebhookMessage{Text: string(body)} // Slack shows a plain-text ack as is
	}
	var bl []slack.Block
	var raw json.RawMessage
	if msg.Blocks != nil && len(msg.Blocks.BlockSet) > 0 {
		bl = msg.Blocks.BlockSet
		raw, _ = json.Marshal(bl)
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg.ResponseType == slack.ResponseTypeInChannel {
		s.add(&message{Message: Message{Channel: channel, TS: s.ts(), Text: msg.Text, Blocks: bl, RawBlocks: raw, PostedAt: now}})
	} else {
		s.ephemerals = append(s.ephemerals, Ephemeral{User: user, Channel: channel, Text: msg.Text, Blocks: bl,
			RawBlocks: raw, Via: "ack", At: now})
	}
	s.touch()
}

// serveWebClick sends a button click as a signed block_actions payload.
func (s *Stub) serveWebClick(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Channel  string `json:"channel"`
		TS       string `json:"ts"`
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil || req.ActionID == "" {
		writeJSON(w, http.StatusBadRequest, obj{"ok": false, "error": "want {channel, ts, action_id, value}"})
		return
	}
	cfg := s.webConfig()
	if cfg.BotURL == "" {
		writeJSON(w, http.StatusServiceUnavailable, obj{"ok": false, "error": "no bot is connected to this page"})
		return
	}
	resp, err := s.Click(cfg.BotURL, req.ActionID, req.Value, cfg.User, req.Channel, req.TS)
	if err != nil {
		writeJSON(w, http.StatusOK, obj{"ok": false, "error": err.Error()})
		return
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		writeJSON(w, http.StatusOK, obj{"ok": false, "error": "the app answered " + resp.Status})
		return
	}
	writeJSON(w, http.StatusOK, obj{"ok": true})
}

// serveWebFile serves an uploaded file's content.
func (s *Stub) serveWebFile(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f, ok := s.files[r.PathValue("id")]
	var name string
	var content []byte
	if ok {
		name, content = f.Name, f.Content
	}
	s.mu.Unlock()
	if !ok || content == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf("inline; filename=%q", name))
	_, _ = w.Write(content)
}

func (s *Stub) webConfig() WebConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.web.cfg
}

// addNote records something only the page shows.
func (s *Stub) addNote(kind, channel, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.web.notes = append(s.web.notes, webNote{kind: kind, channel: channel, text: text, at: time.Now()})
	s.touch()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
