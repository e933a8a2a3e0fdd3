package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for raw, want := range map[string]string{
		"amqp://guest:s3cret@127.0.0.1:5672/": "amqp://guest:xxxxx@127.0.0.1:5672/",
		"redis://:pw@127.0.0.1:6379/0":        "redis://:xxxxx@127.0.0.1:6379/0",
		"http://127.0.0.1:15672":              "http://127.0.0.1:15672",
		"amqp://user:p%40ss@host/vh":          "amqp://user:xxxxx@host/vh",
		"http://u:pw@[::1]:bad port/\x7f":     "(unparsable URL)",
	} {
		got := URL(raw)
		if got != want {
			t.Errorf("URL(%q) = %q, want %q", raw, got, want)
		}
		if strings.Contains(got, "s3cret") || strings.Contains(got, "pw@") {
			t.Errorf("URL(%q) leaks the password: %q", raw, got)
		}
	}
}

func TestTokens(t *testing.T) {
	tok := "p_AbCdEfGhIjKlMnOpQrStUv"
	got := Tokens("replay " + tok + " step=5; again " + tok + ".")
	if strings.Contains(got, tok) || !strings.Contains(got, "t_") {
		t.Fatalf("Tokens left the token or named no reference: %q", got)
	}
	if s := "replay p_short and p_AbCdEfGhIjKlMnOpQrStUvWXYZ"; Tokens(s) != s {
		t.Fatalf("Tokens changed what is not a token: %q", Tokens(s))
	}
}
