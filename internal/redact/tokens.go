package redact

import (
	"regexp"

	"github.com/stroma/dlqbot/audit"
)

// tokenPattern matches a preview token as the store issues them: "p_"
// and 22 characters of unpadded base64url (128 random bits).
var tokenPattern = regexp.MustCompile(`\bp_[A-Za-z0-9_-]{22}\b`)

// Tokens replaces every preview token in s by its reference
// (audit.TokenRef), so that a log line or error message that quotes a
// command, a button value or an error still never carries a token that
// approves a replay.
func Tokens(s string) string {
	return tokenPattern.ReplaceAllStringFunc(s, audit.TokenRef)
}
