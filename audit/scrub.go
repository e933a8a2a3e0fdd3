package audit

import "regexp"

// tokenPattern matches a preview token ("p_" and 22 base64url
// characters) and what may run on after it.
var tokenPattern = regexp.MustCompile(`p_[A-Za-z0-9_-]{22,}`)

// ScrubTokens returns s with every preview token in it replaced by its
// TokenRef, for text bound for a log (a request path, an error's
// sentence) that may quote one.
func ScrubTokens(s string) string {
	return tokenPattern.ReplaceAllStringFunc(s, func(m string) string {
		if len(m) != 24 {
			return m
		}
		return TokenRef(m)
	})
}
