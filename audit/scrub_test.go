package audit

import "testing"

func TestScrubTokens(t *testing.T) {
	tok := "p_AEPDuYxE8eID1-KYBiCsyA"
	got := ScrubTokens("POST /api/v1/previews/" + tok + "/approve: engine: compare " + tok + ": x")
	want := "POST /api/v1/previews/" + TokenRef(tok) + "/approve: engine: compare " + TokenRef(tok) + ": x"
	if got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if s := "p_short and p_" + tok[2:] + "x"; ScrubTokens(s) != s {
		t.Fatalf("scrubbed what is not a token: %q", ScrubTokens(s))
	}
}
