package slackstub

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// AckTimeout is how long SocketCommand and SocketClick wait for the bot's
// ack: Slack's 3 seconds.
const AckTimeout = 3 * time.Second

// socketHub is the Socket Mode side of the stand-in: one websocket
// connection at a time (the latest wins), envelopes out, acks in.
type socketHub struct {
	s        *Stub
	upgrader websocket.Upgrader

	mu      sync.Mutex
	conn    *websocket.Conn
	writeMu sync.Mutex
	waiters map[string]chan json.RawMessage
	// last is the last envelope sent, for SocketRetry.
	last   map[string]any
	closed bool
	done   chan struct{}
}

func newSocketHub(s *Stub) *socketHub {
	return &socketHub{
		s:        s,
		upgrader: websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }},
		waiters:  map[string]chan json.RawMessage{},
		done:     make(chan struct{}),
	}
}

// serve accepts a Socket Mode connection, says hello and reads acks.
func (h *socketHub) serve(w http.ResponseWriter, r *http.Request) {
	conn, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		_ = conn.Close()
		return
	}
	old := h.conn
	h.conn = conn
	h.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	hello := map[string]any{"type": "hello", "num_connections": 1,
		"connection_info": map[string]any{"app_id": AppID}, "debug_info": map[string]any{"host": "slackstub"}}
	if err := h.write(conn, hello); err != nil {
		return
	}
	go h.ping(conn)
	for {
		var ack struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if err := conn.ReadJSON(&ack); err != nil {
			h.mu.Lock()
			if h.conn == conn {
				h.conn = nil
			}
			h.mu.Unlock()
			return
		}
		h.mu.Lock()
		ch := h.waiters[ack.EnvelopeID]
		delete(h.waiters, ack.EnvelopeID)
		h.mu.Unlock()
		if ch != nil {
			ch <- ack.Payload
		}
	}
}

// ping keeps the connection alive the way Slack does.
func (h *socketHub) ping(conn *websocket.Conn) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-h.done:
			return
		case <-t.C:
			h.writeMu.Lock()
			err := conn.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second))
			h.writeMu.Unlock()
			if err != nil {
				return
			}
		}
	}
}

func (h *socketHub) write(conn *websocket.Conn, v any) error {
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return conn.WriteJSON(v)
}

func (h *socketHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	close(h.done)
	if h.conn != nil {
		_ = h.conn.Close()
		h.conn = nil
	}
}

// send delivers an envelope of kind with payload and waits for its ack.
func (h *socketHub) send(kind string, payload any) (json.RawMessage, error) {
	deadline := time.Now().Add(10 * time.Second)
	var conn *websocket.Conn
	for {
		h.mu.Lock()
		conn = h.conn
		h.mu.Unlock()
		if conn != nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, errors.New("slackstub: no Socket Mode connection")
		}
		time.Sleep(10 * time.Millisecond) // waiting for the bot to connect
	}
	h.s.mu.Lock()
	id := fmt.Sprintf("env-%08d", h.s.nextID())
	h.s.mu.Unlock()
	env := map[string]any{"envelope_id": id, "type": kind, "payload": payload,
		"accepts_response_payload": kind == "slash_commands", "retry_attempt": 0, "retry_reason": ""}
	h.mu.Lock()
	h.last = env
	h.mu.Unlock()
	return h.deliver(conn, id, env)
}

// deliver writes env and waits for the ack of envelope id.
func (h *socketHub) deliver(conn *websocket.Conn, id string, env map[string]any) (json.RawMessage, error) {
	ch := make(chan json.RawMessage, 1)
	h.mu.Lock()
	h.waiters[id] = ch
	h.mu.Unlock()
	if err := h.write(conn, env); err != nil {
		return nil, fmt.Errorf("slackstub: send envelope: %w", err)
	}
	select {
	case p := <-ch:
		return p, nil
	case <-time.After(AckTimeout):
		h.mu.Lock()
		delete(h.waiters, id)
		h.mu.Unlock()
		return nil, fmt.Errorf("slackstub: envelope %s not acked within %s", id, AckTimeout)
	}
}

// SocketConnected reports whether a bot holds a Socket Mode connection.
func (s *Stub) SocketConnected() bool {
	s.sock.mu.Lock()
	defer s.sock.mu.Unlock()
	return s.sock.conn != nil
}

// SocketCommand delivers a slash command through Socket Mode and returns
// the bot's ack payload (nil when it acked without one). It fails when the
// bot does not ack within AckTimeout.
func (s *Stub) SocketCommand(command, text, user, channel string) (json.RawMessage, error) {
	form := s.CommandForm(command, text, user, channel)
	p := map[string]string{}
	for k := range form {
		p[k] = form.Get(k)
	}
	return s.sock.send("slash_commands", p)
}

// SocketClick delivers a block_actions interaction through Socket Mode
// (see ClickPayload) and waits for the bot's ack.
func (s *Stub) SocketClick(actionID, value, user, channel, messageTS string) error {
	payload, err := s.ClickPayload(actionID, value, user, channel, messageTS)
	if err != nil {
		return err
	}
	_, err = s.sock.send("interactive", json.RawMessage(payload))
	return err
}

// SocketRetry delivers the last Socket Mode envelope again, as Slack does
// when it saw no ack in time: retry_attempt 1, retry_reason "timeout",
// the same payload (and so the same trigger_id), under the same envelope
// id or, with newEnvelope, a new one. It waits for the bot's ack.
func (s *Stub) SocketRetry(newEnvelope bool) (json.RawMessage, error) {
	h := s.sock
	h.mu.Lock()
	last, conn := h.last, h.conn
	h.mu.Unlock()
	if last == nil || conn == nil {
		return nil, errors.New("slackstub: no envelope to retry, or no Socket Mode connection")
	}
	env := map[string]any{}
	for k, v := range last {
		env[k] = v
	}
	env["retry_attempt"], env["retry_reason"] = 1, "timeout"
	id := env["envelope_id"].(string)
	if newEnvelope {
		s.mu.Lock()
		id = fmt.Sprintf("env-%08d", s.nextID())
		s.mu.Unlock()
		env["envelope_id"] = id
	}
	return h.deliver(conn, id, env)
}
