package letter

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"math"
	"reflect"
	"sort"
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
// identity is the failure's identity, as ParseMetaDialect builds it: the dialect
// name followed by the first-death queue and time (Unix seconds) for
// RabbitMQ; the original exchange, routing key and exception message for
// Spring; the input address and fault timestamp for MassTransit; FailedQ and
// TimeOfFailure for NServiceBus; the timestamp property when the dialect is
// unknown; the rascal and in-house identities are described beside their
// parsers. A copy with no failure time (Spring, rascal's forward, an
// in-house dialect without a time header, unknown) adds a digest of the
// whole copy (copyDigest): every header and its timestamp and content type,
// so two failures that differ in anything get different ids. It ends with
// x-replay-id and x-replay-count when present, so a copy that came back
// from a replay never shares an id with the original.
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

// scanVariantHeaders change between two reads of the same copy (the broker
// counts deliveries in them): they never enter its digest.
var scanVariantHeaders = map[string]bool{"x-delivery-count": true, "x-acquired-count": true}

// maxDigestDepth bounds the nesting copyDigest follows.
const maxDigestDepth = 16

// copyDigest identifies a copy that has no failure time: a SHA-256 (16 hex
// characters) over its timestamp and content type properties and every
// header but scanVariantHeaders, in a canonical, type-tagged encoding
// (keys sorted, nested tables and arrays followed to maxDigestDepth). It is
// the same on every scan of the copy; two copies differ whenever any header
// or those properties differ. Byte-identical copies still share it.
func copyDigest(m Message) string {
	h := sha256.New()
	d := digester{h: h}
	d.str("ts", m.Timestamp.UTC().Format(time.RFC3339Nano))
	d.str("ct", m.ContentType)
	keys := make([]string, 0, len(m.Headers))
	for k := range m.Headers {
		if !scanVariantHeaders[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		d.str("k", k)
		d.value(m.Headers[k], 0)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// digester writes type-tagged, length-prefixed values into a hash.
type digester struct{ h hash.Hash }

func (d digester) str(tag, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	d.h.Write([]byte(tag))
	d.h.Write(n[:])
	d.h.Write([]byte(s))
}

func (d digester) value(v any, depth int) {
	if depth > maxDigestDepth {
		d.str("deep", "")
		return
	}
	switch x := v.(type) {
	case nil:
		d.str("nil", "")
		return
	case string:
		d.str("s", x)
		return
	case []byte:
		d.str("b", string(x))
		return
	case bool:
		d.str("bool", strconv.FormatBool(x))
		return
	case time.Time:
		d.str("t", strconv.FormatInt(x.Unix(), 10))
		return
	case float32:
		d.str("f32", strconv.FormatUint(uint64(math.Float32bits(x)), 10))
		return
	case float64:
		d.str("f64", strconv.FormatUint(math.Float64bits(x), 10))
		return
	}
	if isGoIntegerValue(v) {
		rv := reflect.ValueOf(v)
		switch rv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			d.str(rv.Kind().String(), strconv.FormatInt(rv.Int(), 10))
		default:
			d.str(rv.Kind().String(), strconv.FormatUint(rv.Uint(), 10))
		}
		return
	}
	if t, ok := asTable(v); ok {
		var keys []string
		if t.plain != nil {
			for k := range t.plain {
				keys = append(keys, k)
			}
		} else {
			for _, k := range t.rv.MapKeys() {
				keys = append(keys, k.String())
			}
		}
		sort.Strings(keys)
		d.str("F", strconv.Itoa(len(keys)))
		for _, k := range keys {
			d.str("k", k)
			x, _ := t.get(k)
			d.value(x, depth+1)
		}
		return
	}
	if a, ok := asArray(v); ok {
		d.str("A", strconv.Itoa(a.n))
		for i := 0; i < a.n; i++ {
			d.value(a.at(i), depth+1)
		}
		return
	}
	if scale, val, ok := hdrDecimalParts(v); ok {
		d.str("D", strconv.FormatUint(scale, 10)+"/"+strconv.FormatInt(val, 10))
		return
	}
	if s, _, ok := hdrString(v, math.MaxInt32); ok {
		d.str("s", s)
		return
	}
	d.str("?", hdrTypeName(v))
}
