package redact

import (
	"regexp"

	"github.com/stroma/dlqbot/audit"
)

// tokenPattern matches a preview token as the store issues them ("p_"
// and 22 characters of unpadded base64url, 128 random bits) and what
// may run on after it. Tokens checks the length rather than the pattern
// ending on a word boundary: a token may end in "-", after which \b
// does not hold before a space, a slash or the end of the text.
var tokenPattern = regexp.MustCompile(`p_[A-Za-z0-9_-]{22,}`)

// Tokens replaces every preview token in s by its reference
// (audit.TokenRef), so that a log line, an audit detail or an error
// message that quotes a command, a request path, a button value or an
// error still never carries a token that approves a replay. A longer
// run of base64url characters is not a token and is left as it is.
func Tokens(s string) string {
	return tokenPattern.ReplaceAllStringFunc(s, func(m string) string {
		if len(m) != 24 {
			return m
		}
		return audit.TokenRef(m)
	})
}
