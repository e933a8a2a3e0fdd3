package redact

import (
	"strings"
	"testing"

	"github.com/stroma/dlqbot/audit"
)

func TestScrubTokens(t *testing.T) {
	tok := "p_AEPDuYxE8eID1-KYBiCsyA"
	got := Tokens("POST /api/v1/previews/" + tok + "/approve: engine: compare " + tok + ": x")
	want := "POST /api/v1/previews/" + audit.TokenRef(tok) + "/approve: engine: compare " + audit.TokenRef(tok) + ": x"
	if got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if s := "p_short and p_" + tok[2:] + "x"; Tokens(s) != s {
		t.Fatalf("scrubbed what is not a token: %q", Tokens(s))
	}
}

func TestTokensEndingInDash(t *testing.T) {
	tok := "p_AEPDuYxE8eID1-KYBiCsy-"
	for _, s := range []string{tok, "/previews/" + tok + "/approve", "approve " + tok + " now"} {
		if got := Tokens(s); got == s || strings.Contains(got, tok) {
			t.Errorf("Tokens(%q) = %q: the token is still there", s, got)
		}
	}
}
