package api

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/ops"
)

// memTrail is an audit.Recorder in memory.
type memTrail struct {
	mu      sync.Mutex
	entries []audit.Entry
}

func (m *memTrail) Record(_ context.Context, e audit.Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries = append(m.entries, e)
	return nil
}

// TestRefusedAuthenticationIsAudited: a call without a token and one with
// an unknown token are each an audit entry (authenticate, refused,
// unauthorized, the remote address), never quoting the token; a known
// token adds none.
func TestRefusedAuthenticationIsAudited(t *testing.T) {
	p, err := commands.ParsePolicy([]byte(`principals:
  - name: ci
    token_sha256: ` + commands.HashToken("s3cret") + `
roles:
  - name: ci
    principals: [ci]
    grants:
      - queues: ["*"]
        actions: [read]
`))
	if err != nil {
		t.Fatal(err)
	}
	trail := &memTrail{}
	o, err := ops.New(ops.Config{Policy: p}, ops.Deps{Engine: nothing{}, Tokens: nothing{}, Replays: nothing{}, Windows: nothing{}, Audit: trail})
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{cfg: Config{}.withDefaults(), ops: o}
	for _, h := range []string{"", "Bearer guessed-token-123", "Bearer s3cret"} {
		r := httptest.NewRequest("GET", "/api/v1/replays", nil)
		r.RemoteAddr = "192.0.2.7:4711"
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		_, _ = s.Authenticate(r, "mcp")
	}
	if len(trail.entries) != 2 {
		t.Fatalf("%d entries, want one per refused call: %+v", len(trail.entries), trail.entries)
	}
	for _, e := range trail.entries {
		if e.Op != audit.OpAuthenticate || e.Outcome != audit.OutcomeRefused || e.Code != CodeUnauthorized ||
			e.FrontEnd != "mcp" || !strings.Contains(e.Detail, "192.0.2.7") || strings.Contains(e.Detail, "guessed") {
			t.Errorf("entry %+v", e)
		}
	}
}
