package slackstub

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// obj is a JSON object answer.
type obj = map[string]any

// serveAPI answers one Web API call.
func (s *Stub) serveAPI(w http.ResponseWriter, r *http.Request) {
	c := Call{Method: trimMethod(r.URL.Path), Args: url.Values{}, At: time.Now()}
	for k, vs := range r.URL.Query() {
		c.Args[k] = append(c.Args[k], vs...)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		if len(body) > 0 {
			if err := json.Unmarshal(body, &c.JSON); err != nil {
				s.answer(w, &c, http.StatusOK, obj{"ok": false, "error": "invalid_json"})
				return
			}
		}
		for k, v := range c.JSON {
			if str, ok := v.(string); ok {
				c.Args.Set(k, str)
			} else {
				raw, _ := json.Marshal(v)
				c.Args.Set(k, string(raw))
			}
		}
	default:
		form, err := url.ParseQuery(string(body))
		if err != nil {
			s.answer(w, &c, http.StatusOK, obj{"ok": false, "error": "invalid_form_data"})
			return
		}
		for k, vs := range form {
			c.Args[k] = append(c.Args[k], vs...)
		}
	}
	if raw := c.Args.Get("blocks"); raw != "" {
		var bs slack.Blocks
		if err := json.Unmarshal([]byte(raw), &bs); err != nil {
			s.answer(w, &c, http.StatusOK, obj{"ok": false, "error": "invalid_blocks"})
			return
		}
		c.Blocks = bs.BlockSet
	}
	token := c.Args.Get("token")
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		token = strings.TrimPrefix(h, "Bearer ")
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if fs := s.faults[c.Method]; len(fs) > 0 {
		f := fs[0]
		s.faults[c.Method] = fs[1:]
		if f.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(f.retryAfter))
		}
		s.answer(w, &c, f.status, obj{"ok": false, "error": f.err})
		return
	}
	if token == "" {
		s.answer(w, &c, http.StatusOK, obj{"ok": false, "error": "not_authed"})
		return
	}
	s.answer(w, &c, http.StatusOK, s.method(&c, token))
}

// answer records c and writes the answer (callers hold mu).
func (s *Stub) answer(w http.ResponseWriter, c *Call, status int, body obj) {
	c.Status = status
	if ok, _ := body["ok"].(bool); !ok {
		c.Error, _ = body["error"].(string)
	}
	s.calls = append(s.calls, *c)
	s.touch()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func fail(code string) obj { return obj{"ok": false, "error": code} }

// method runs the Web API method of c (callers hold mu).
func (s *Stub) method(c *Call, token string) obj {
	a := c.Args
	switch c.Method {
	case "auth.test":
		return obj{"ok": true, "url": "https://stub.slack.com/", "team": TeamName, "user": "dlqbot",
			"team_id": TeamID, "user_id": BotUserID, "bot_id": BotID}
	case "chat.postMessage":
		return s.postMessage(c)
	case "chat.update":
		m, ok := s.byTS[a.Get("channel")+"/"+a.Get("ts")]
		if !ok || m.deleted {
			return fail("message_not_found")
		}
		if a.Get("text") == "" && a.Get("blocks") == "" {
			return fail("no_text")
		}
		m.Text = a.Get("text")
		if a.Has("blocks") {
			m.Blocks, m.RawBlocks = c.Blocks, json.RawMessage(a.Get("blocks"))
		}
		m.EditedAt = append(m.EditedAt, c.At)
		return obj{"ok": true, "channel": m.Channel, "ts": m.TS, "text": m.Text, "message": s.messageJSON(m)}
	case "chat.getPermalink":
		m, ok := s.byTS[a.Get("channel")+"/"+a.Get("message_ts")]
		if !ok || m.deleted {
			return fail("message_not_found")
		}
		link := s.base + "/archives/" + m.Channel + "/p" + strings.ReplaceAll(m.TS, ".", "")
		if m.ThreadTS != "" && m.ThreadTS != m.TS {
			link += "?thread_ts=" + m.ThreadTS + "&cid=" + m.Channel
		}
		return obj{"ok": true, "channel": m.Channel, "permalink": link}
	case "chat.postEphemeral":
		if a.Get("channel") == "" {
			return fail("channel_not_found")
		}
		if a.Get("user") == "" {
			return fail("user_not_in_channel")
		}
		s.ephemerals = append(s.ephemerals, Ephemeral{User: a.Get("user"), Channel: a.Get("channel"),
			ThreadTS: a.Get("thread_ts"), Text: a.Get("text"), Blocks: c.Blocks,
			RawBlocks: json.RawMessage(a.Get("blocks")), Via: "chat.postEphemeral", At: c.At})
		return obj{"ok": true, "message_ts": s.ts()}
	case "chat.delete":
		m, ok := s.byTS[a.Get("channel")+"/"+a.Get("ts")]
		if !ok || m.deleted {
			return fail("message_not_found")
		}
		m.deleted = true
		return obj{"ok": true, "channel": m.Channel, "ts": m.TS}
	case "usergroups.list":
		var out []obj
		for _, id := range s.groupIDs() {
			g := obj{"id": id, "team_id": TeamID, "is_usergroup": true, "name": id, "handle": strings.ToLower(id),
				"user_count": len(s.groups[id])}
			if a.Get("include_users") == "true" {
				g["users"] = s.groups[id]
			}
			out = append(out, g)
		}
		return obj{"ok": true, "usergroups": out}
	case "usergroups.users.list":
		us, ok := s.groups[a.Get("usergroup")]
		if !ok {
			return fail("no_such_subteam")
		}
		return obj{"ok": true, "users": us}
	case "files.getUploadURLExternal":
		n, err := strconv.Atoi(a.Get("length"))
		if a.Get("filename") == "" || err != nil || n <= 0 {
			return fail("invalid_arguments")
		}
		id := fmt.Sprintf("F%08d", s.nextID())
		s.files[id] = &File{ID: id, Name: a.Get("filename")}
		s.fileOrder = append(s.fileOrder, id)
		return obj{"ok": true, "upload_url": s.base + "/upload/" + id, "file_id": id}
	case "files.completeUploadExternal":
		return s.completeUpload(c)
	case "conversations.open":
		// A direct message with one user: its id is "D" and the user's.
		users := a.Get("users")
		if users == "" || strings.Contains(users, ",") {
			return fail("invalid_arguments")
		}
		return obj{"ok": true, "channel": obj{"id": DMChannel(users)}}
	case "apps.connections.open":
		if !strings.HasPrefix(token, "xapp-") {
			return fail("invalid_auth")
		}
		return obj{"ok": true, "url": "ws" + strings.TrimPrefix(s.base, "http") + "/socket"}
	}
	return fail("unknown_method")
}

func (s *Stub) groupIDs() []string {
	ids := make([]string, 0, len(s.groups))
	for id := range s.groups {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// postMessage posts a message or a thread reply (callers hold mu).
func (s *Stub) postMessage(c *Call) obj {
	a := c.Args
	ch := a.Get("channel")
	if ch == "" {
		return fail("channel_not_found")
	}
	if e := s.chanErrors[ch]; e != "" {
		return fail(e)
	}
	if a.Get("text") == "" && a.Get("blocks") == "" {
		return fail("no_text")
	}
	thread := a.Get("thread_ts")
	if thread != "" {
		parent, ok := s.byTS[ch+"/"+thread]
		if !ok || parent.deleted {
			return fail("thread_not_found")
		}
		if parent.ThreadTS != "" {
			thread = parent.ThreadTS
		}
	}
	m := &message{Message: Message{Channel: ch, TS: s.ts(), ThreadTS: thread, Text: a.Get("text"),
		Blocks: c.Blocks, RawBlocks: json.RawMessage(a.Get("blocks")), PostedAt: c.At}}
	s.add(m)
	return obj{"ok": true, "channel": ch, "ts": m.TS, "message": s.messageJSON(m)}
}

// messageJSON renders m as Slack's message object (callers hold mu).
func (s *Stub) messageJSON(m *message) obj {
	o := obj{"type": "message", "user": BotUserID, "bot_id": BotID, "app_id": AppID, "team": TeamID,
		"text": m.Text, "ts": m.TS}
	if m.ThreadTS != "" {
		o["thread_ts"] = m.ThreadTS
	}
	if len(m.RawBlocks) > 0 {
		o["blocks"] = m.RawBlocks
	} else {
		o["blocks"] = []any{}
	}
	return o
}

// completeUpload shares uploaded files in a channel (callers hold mu).
func (s *Stub) completeUpload(c *Call) obj {
	a := c.Args
	var fs []slack.FileSummary
	if err := json.Unmarshal([]byte(a.Get("files")), &fs); err != nil || len(fs) == 0 {
		return fail("invalid_arguments")
	}
	ch := a.Get("channel_id")
	if ch == "" {
		ch, _, _ = strings.Cut(a.Get("channels"), ",")
	}
	thread := a.Get("thread_ts")
	if thread != "" {
		if _, ok := s.byTS[ch+"/"+thread]; !ok {
			return fail("thread_not_found")
		}
	}
	var shared []File
	out := make([]obj, 0, len(fs))
	for _, sum := range fs {
		f, ok := s.files[sum.ID]
		if !ok || f.Content == nil {
			return fail("file_not_found")
		}
		f.Title, f.Channel, f.ThreadTS, f.Comment = sum.Title, ch, thread, a.Get("initial_comment")
		shared = append(shared, *f)
		out = append(out, obj{"id": f.ID, "title": f.Title})
	}
	if ch != "" {
		m := &message{Message: Message{Channel: ch, TS: s.ts(), ThreadTS: thread, Text: a.Get("initial_comment"),
			Files: shared, PostedAt: c.At}}
		s.add(m)
	}
	return obj{"ok": true, "files": out}
}

// serveUpload receives a file's content at its upload URL.
func (s *Stub) serveUpload(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		http.Error(w, "bad upload", http.StatusBadRequest)
		return
	}
	f, _, err := r.FormFile("file")
	if err != nil {
		http.Error(w, "no file", http.StatusBadRequest)
		return
	}
	defer f.Close()
	content, err := io.ReadAll(f)
	if err != nil {
		http.Error(w, "bad upload", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	file, ok := s.files[id]
	if !ok {
		http.Error(w, "unknown file", http.StatusNotFound)
		return
	}
	file.Content = content
	fmt.Fprintf(w, "OK - %d", len(content))
}
