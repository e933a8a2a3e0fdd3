package api

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
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
	s := &Service{cfg: Config{Policy: p}.withDefaults()}
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
		case tc.code == "" && (aerr != nil || c.ID != "api:ci" || c.Principal != "ci" || c.Via != "api"):
			t.Errorf("%q: caller %+v, error %v", tc.header, c, aerr)
		case tc.code != "" && (aerr == nil || aerr.Code != tc.code || aerr.Status != 401 || c.ID != ""):
			t.Errorf("%q: caller %+v, error %+v, want %s", tc.header, c, aerr, tc.code)
		}
	}
	off := &Service{cfg: Config{}.withDefaults()}
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
