// Package redact hides secrets in what dlqbot prints: one rule for every
// URL it names in a message or a log line, one for the fields of a
// message body a policy hides (or all but those it shows), and one for
// preview tokens (a token approves a replay, so a log line, an audit
// detail or an error names it only by its audit.TokenRef). It imports nothing of dlqbot but audit.
//
// Files:
//
//	redact.go  URL, a URL without its password
//	json.go    JSON and JSONShow, the values at JSON paths of a message body
//	           hidden, or all but those an allowlist names
//	tokens.go  Tokens, every preview token replaced by its reference
package redact
