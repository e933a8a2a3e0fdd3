package redact

import "net/url"

// URL returns raw with its password replaced by "xxxxx" (url.URL.Redacted),
// or "(unparsable URL)" when raw is not a URL, so that an error message
// never carries a credential.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
