package store

import (
	"encoding/hex"
	"strings"
)

// A watch alert's record says which Slack message the bot edits and
// what it counted, so a store with a key signs it: the stored value is
// the record's JSON, a newline (which JSON never holds outside a string)
// and the hex MAC of the DLQ and the JSON. A record that fails its check
// is refused (SignatureError, kind "alert"): it is never edited or
// posted, Get and List read it as no alert, and the next alert the watch
// opens for that DLQ replaces it.

// alertSigSep separates an alert's JSON from its MAC.
const alertSigSep = "\n"

// signAlert returns the stored form of dlq's alert record js.
func (b *base) signAlert(dlq string, js []byte) string {
	if len(b.cfg.SigningKey) == 0 {
		return string(js)
	}
	return string(js) + alertSigSep + hex.EncodeToString(b.mac("alert", dlq, js))
}

// openAlert checks dlq's stored alert and returns its JSON.
func (b *base) openAlert(dlq, stored string) ([]byte, error) {
	js, sig, signed := strings.Cut(stored, alertSigSep)
	switch {
	case !signed:
		return []byte(stored), b.unsigned("alert", dlq)
	case len(b.cfg.SigningKey) == 0:
		return nil, b.refuse("alert", dlq, "it is signed, but this dlqbot has no signing key (DLQBOT_SIGNING_KEY) to check it")
	case !hmacEqualHex(sig, hex.EncodeToString(b.mac("alert", dlq, []byte(js)))):
		return nil, b.refuse("alert", dlq, "its signature does not match its contents (changed in Redis, or signed with another key)")
	}
	return []byte(js), nil
}
