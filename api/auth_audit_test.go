package api

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
)

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
	trail := &testkit.Trail{}
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
	entries := trail.Find("", "", "")
	if len(entries) != 2 {
		t.Fatalf("%d entries, want one per refused call: %+v", len(entries), entries)
	}
	for _, e := range entries {
		if e.Op != audit.OpAuthenticate || e.Outcome != audit.OutcomeRefused || e.Code != CodeUnauthorized ||
			e.FrontEnd != "mcp" || !strings.Contains(e.Detail, "192.0.2.7") || strings.Contains(e.Detail, "guessed") {
			t.Errorf("entry %+v", e)
		}
	}
}
