package api

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

func TestAuthenticate(t *testing.T) {
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
	s := &Service{cfg: Config{}.withDefaults(), ops: opsWith(t, p)}
	for _, tc := range []struct {
		header, code string
	}{
		{"Bearer s3cret", ""},
		{"bearer  s3cret ", ""},
		{"", CodeUnauthorized},
		{"Bearer", CodeUnauthorized},
		{"Bearer ", CodeUnauthorized},
		{"Basic s3cret", CodeUnauthorized},
		{"Bearer s3cre", CodeUnauthorized},
		{"Bearer " + commands.HashToken("s3cret"), CodeUnauthorized},
	} {
		r := httptest.NewRequest("GET", "/api/v1/replays", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		c, aerr := s.Authenticate(r, "api")
		switch {
		case tc.code == "" && (aerr != nil || c.Identity != "api:ci" || c.Principal != "ci" || c.FrontEnd != "api"):
			t.Errorf("%q: caller %+v, error %v", tc.header, c, aerr)
		case tc.code != "" && (aerr == nil || aerr.Code != tc.code || aerr.Status != 401 || c.Identity != ""):
			t.Errorf("%q: caller %+v, error %+v, want %s", tc.header, c, aerr, tc.code)
		}
	}
	off := &Service{cfg: Config{}.withDefaults(), ops: opsWith(t, nil)}
	r := httptest.NewRequest("GET", "/api/v1/replays", nil)
	r.Header.Set("Authorization", "Bearer s3cret")
	if _, aerr := off.Authenticate(r, "api"); aerr == nil || aerr.Code != CodeAPIDisabled || aerr.Status != 404 {
		t.Errorf("without a permissions file: %+v", aerr)
	}
}

func TestRateAndDigest(t *testing.T) {
	for in, want := range map[string]Rate{`50`: "50", `2.5`: "2.5", `"max"`: "max", `"50"`: "50"} {
		var r Rate
		if err := json.Unmarshal([]byte(in), &r); err != nil || r != want {
			t.Errorf("rate %s = %q, %v", in, r, err)
		}
	}
	var r Rate
	if err := json.Unmarshal([]byte(`{}`), &r); err == nil {
		t.Error("an object was accepted as a rate")
	}
	a := []engine.Change{{Kind: engine.ChangeMessagesGone, Queue: "q", Messages: 2, Detail: "x"}}
	b := []engine.Change{{Kind: engine.ChangeMessagesGone, Queue: "q", Messages: 3, Detail: "x"}}
	if ChangesDigest(a) != ChangesDigest([]engine.Change{{Kind: engine.ChangeMessagesGone, Queue: "q", Messages: 2, Detail: "other words"}}) {
		t.Error("the digest depends on the wording")
	}
	if ChangesDigest(a) == ChangesDigest(b) || ChangesDigest(a) == ChangesDigest(nil) {
		t.Error("different changes share a digest")
	}
}

// nothing stands in for every port of the operations; these tests never
// reach them.
type nothing struct{ ops.Engine }

func (n nothing) LoadHeader(ctx context.Context, t string) (engine.Frozen, error) {
	return n.Load(ctx, t)
}

func (nothing) Load(context.Context, string) (engine.Frozen, error) {
	return engine.Frozen{}, engine.ErrTokenNotFound
}
func (nothing) Discard(context.Context, string) error              { return nil }
func (nothing) List(context.Context, int) ([]engine.Replay, error) { return nil, nil }
func (nothing) Take(context.Context, string, int, int, time.Duration) (ops.Take, error) {
	return ops.Take{}, nil
}
func (nothing) Give(context.Context, string, string) error { return nil }

func opsWith(t *testing.T, p *commands.Policy) *ops.Ops {
	t.Helper()
	o, err := ops.New(ops.Config{Policy: p}, ops.Deps{Engine: nothing{}, Tokens: nothing{}, Replays: nothing{}, Windows: nothing{}})
	if err != nil {
		t.Fatal(err)
	}
	return o
}
