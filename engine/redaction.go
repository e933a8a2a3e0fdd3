package engine

import (
	"sort"
	"strings"
)

// Hidden replaces every value a redaction rule hides.
const Hidden = "[redacted]"

// Redactor holds the operator's redaction rules (the permissions file's
// redaction section). The engine applies them where a preview's view of a
// message is made, so that what Slack, the API, MCP, the terminal and the
// logs show is already redacted.
type Redactor interface {
	// HiddenHeaders returns the values of headers (a message of dlq) that
	// must never be shown.
	HiddenHeaders(dlq string, headers map[string]any) []string
	// RedactBody returns body with the values the rules name hidden, and
	// those values; ok is false when body cannot be redacted (then none of
	// it may be shown).
	RedactBody(dlq string, body []byte) (out []byte, hidden []string, ok bool)
}

// HeaderLine writes a sample's headers on one line, by name:
// "shard=7 tenant=acme" (values quoted when they hold spaces or quotes).
func HeaderLine(h map[string]string) string {
	names := make([]string, 0, len(h))
	for n := range h {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + quoteIfNeeded(h[n])
	}
	return strings.Join(parts, " ")
}
