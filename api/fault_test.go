package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/ops"
)

// TestFaultBodiesCarryNoInternalText: a fault inside dlqbot answers 500
// with a sentence and a request id, and nothing of the error itself (an
// address, a host name); the log has the cause under that request id.
// (Before, the body quoted the error.)
func TestFaultBodiesCarryNoInternalText(t *testing.T) {
	t.Parallel()
	cause := errors.New("redis: dial tcp 10.9.8.7:6379: connect: secret-host.internal refused")
	pe := &probeEngine{fail: cause}
	policy, err := commands.ParsePolicy([]byte(`principals:
  - {name: all, token_sha256: ` + commands.HashToken(probeAll) + `}
roles:
  - name: all
    principals: [all]
    grants: [{queues: ["*"], actions: [read, replay, publish]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	o, err := ops.New(ops.Config{Policy: policy}, ops.Deps{Engine: pe, Tokens: pe, Replays: pe, Windows: pe, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s, err := New(Config{EventPoll: time.Millisecond}, Deps{Ops: o, Log: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/api/v1/replays", nil)
	r.Header.Set("Authorization", "Bearer "+probeAll)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("status %d: %s", w.Code, w.Body.String())
	}
	body := w.Body.String()
	for _, leak := range []string{"10.9.8.7", "secret-host", "dial tcp"} {
		if strings.Contains(body, leak) {
			t.Errorf("the body quotes the error (%q):\n%s", leak, body)
		}
	}
	var e Error
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Code != CodeInternal || e.RequestID == "" || !strings.Contains(e.Message, e.RequestID) {
		t.Fatalf("body %s (%v)", body, err)
	}
	var logged bool
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, e.RequestID) && strings.Contains(line, "secret-host.internal") {
			logged = true
		}
	}
	if !logged {
		t.Errorf("the log has no line with the request id and the cause:\n%s", logs.String())
	}
}
