package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"time"
)

// fingerprintVersion is hashed first, so a future change of the recipe
// cannot collide with ids of this one.
const fingerprintVersion = "dlqbot/fingerprint/v1"

// Fingerprint returns a message copy's id (Meta.ID): the first 16 lowercase
// hex characters of SHA-256 over messageID, body and identity, each part
// length-prefixed so that no two different inputs hash the same bytes.
//
// identity is the failure's identity, as ParseMeta builds it: the dialect
// name followed by the first-death queue and time (Unix seconds) for
// RabbitMQ; the original exchange, routing key and exception message for
// Spring; the input address and fault timestamp for MassTransit; FailedQ and
// TimeOfFailure for NServiceBus; the timestamp property when the dialect is
// unknown. It ends with x-replay-id and x-replay-count when present, so a
// copy that came back from a replay never shares an id with the original.
//
// Equal inputs give equal ids on every scan and in every process; identical
// copies therefore share an id.
func Fingerprint(messageID string, body []byte, identity ...string) string {
	h := sha256.New()
	var n [8]byte
	write := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	write([]byte(fingerprintVersion))
	write([]byte(messageID))
	write(body)
	binary.BigEndian.PutUint64(n[:], uint64(len(identity)))
	h.Write(n[:])
	for _, s := range identity {
		write([]byte(s))
	}
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:8])
}

// rawString renders a top-level header for the fingerprint, without parsing
// it, so that a value the parser cannot read still identifies the failure.
func (p *metaParser) rawString(key string) string {
	v, ok := p.h.get(key)
	if !ok {
		return ""
	}
	if s, _, ok := hdrString(v, maxFieldLen); ok {
		return s
	}
	if t, ok := v.(time.Time); ok {
		return t.UTC().Format(time.RFC3339Nano)
	}
	if n, ok := hdrInt64(v); ok {
		return strconv.FormatInt(n, 10)
	}
	return hdrTypeName(v)
}

// unixString renders t as Unix seconds, or "" for the zero time.
func unixString(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.Unix(), 10)
}
