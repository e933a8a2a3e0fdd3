package letter

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// This file reads AMQP header values defensively. Headers arrive as whatever
// the client library decoded (amqp091-go: string, []byte, int8…int64,
// uint8…uint64, float32/64, bool, time.Time, Decimal, Table, []interface{},
// nil), and a publisher can put any of them anywhere. Nothing here panics on
// an unexpected type: callers get ok=false and a short type name to report.
//
// amqp091-go is deliberately not imported: its named types (Table, Decimal)
// are recognised through reflection by their shape.

// Limits that bound the work done on one message, however large its headers.
const (
	// maxDeathEntries is how many x-death entries are examined.
	maxDeathEntries = 64
	// maxExceptionLen caps exception texts (bytes, cut on a rune boundary).
	maxExceptionLen = 2000
	// maxNameLen caps queue, exchange and routing-key names (AMQP short strings).
	maxNameLen = 255
	// maxFieldLen caps every other string read from a header.
	maxFieldLen = 1024
	// maxProblems caps Meta.Problems; further problems are counted, not listed.
	maxProblems = 16
	// maxRoutingKeys caps the routing keys kept from one x-death entry.
	maxRoutingKeys = 16
)

// hdrTable is a read-only view of an AMQP field table: a map[string]any or any
// named map type with string keys (such as amqp.Table).
type hdrTable struct {
	plain map[string]any
	rv    reflect.Value // used when plain is nil
}

// asTable returns a view of v when v is a map with string keys.
func asTable(v any) (hdrTable, bool) {
	switch t := v.(type) {
	case map[string]any:
		return hdrTable{plain: t}, true
	case nil:
		return hdrTable{}, false
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Map && rv.Type().Key().Kind() == reflect.String {
		return hdrTable{rv: rv}, true
	}
	return hdrTable{}, false
}

// get returns the value stored under key.
func (t hdrTable) get(key string) (any, bool) {
	if t.plain != nil {
		v, ok := t.plain[key]
		return v, ok
	}
	if !t.rv.IsValid() || t.rv.IsNil() {
		return nil, false
	}
	kv := reflect.ValueOf(key).Convert(t.rv.Type().Key())
	v := t.rv.MapIndex(kv)
	if !v.IsValid() || !v.CanInterface() {
		return nil, false
	}
	return v.Interface(), true
}

// hdrArray is a read-only view of an AMQP field array: a []any or any other
// slice or array type whose elements are not bytes.
type hdrArray struct {
	plain []any
	rv    reflect.Value // used when plain is nil
	n     int
}

// asArray returns a view of v when v is a slice or array that is not a byte string.
func asArray(v any) (hdrArray, bool) {
	switch t := v.(type) {
	case []any:
		return hdrArray{plain: t, n: len(t)}, true
	case nil, []byte, string:
		return hdrArray{}, false
	}
	rv := reflect.ValueOf(v)
	if (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array) && rv.Type().Elem().Kind() != reflect.Uint8 {
		return hdrArray{rv: rv, n: rv.Len()}, true
	}
	return hdrArray{}, false
}

// at returns element i (nil when it cannot be read).
func (a hdrArray) at(i int) any {
	if i < 0 || i >= a.n {
		return nil
	}
	if a.plain != nil {
		return a.plain[i]
	}
	v := a.rv.Index(i)
	if !v.CanInterface() {
		return nil
	}
	return v.Interface()
}

// hdrTypeName names v's AMQP-ish type for a problem note.
func hdrTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case string:
		return "string"
	case []byte:
		return "bytes"
	case bool:
		return "bool"
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "integer"
	case float32, float64:
		return "float"
	case time.Time:
		return "timestamp"
	}
	if _, ok := asTable(v); ok {
		return "table"
	}
	if _, ok := asArray(v); ok {
		return "array"
	}
	if _, _, ok := hdrDecimalParts(v); ok {
		return "decimal"
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8 {
		return "bytes"
	}
	return TruncateUTF8(rv.Type().String(), 40)
}

// hdrString reads a string or byte string, keeping at most limit bytes (cut
// on a rune boundary). cut reports whether it was truncated.
func hdrString(v any, limit int) (s string, cut bool, ok bool) {
	switch t := v.(type) {
	case string:
		s = t
	case []byte:
		if len(t) > limit+utf8.UTFMax {
			t = t[:limit+utf8.UTFMax]
		}
		s = string(t)
	default:
		rv := reflect.ValueOf(v)
		switch {
		case rv.Kind() == reflect.String:
			s = rv.String()
		case rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8:
			n := min(rv.Len(), limit+utf8.UTFMax)
			s = string(rv.Slice(0, n).Bytes())
		default:
			return "", false, false
		}
	}
	full := len(s)
	if b, isBytes := v.([]byte); isBytes {
		full = len(b)
	}
	s = TruncateUTF8(s, limit)
	return s, len(s) < full, true
}

// TruncateUTF8 returns s cut to at most limit bytes without splitting a rune.
func TruncateUTF8(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	i := limit
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// hdrInt64 reads any integer type, an integral float or decimal, or a
// decimal string such as "3".
func hdrInt64(v any) (int64, bool) {
	switch t := v.(type) {
	case int:
		return int64(t), true
	case int8:
		return int64(t), true
	case int16:
		return int64(t), true
	case int32:
		return int64(t), true
	case int64:
		return t, true
	case uint:
		return uintToInt64(uint64(t))
	case uint8:
		return int64(t), true
	case uint16:
		return int64(t), true
	case uint32:
		return int64(t), true
	case uint64:
		return uintToInt64(t)
	case float32:
		return floatToInt64(float64(t))
	case float64:
		return floatToInt64(t)
	case string, []byte:
		s, _, _ := hdrString(t, 32)
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		return n, err == nil
	}
	if scale, value, ok := hdrDecimalParts(v); ok {
		if scale > 18 {
			return 0, false
		}
		p := int64(math.Pow10(int(scale)))
		if value%p != 0 {
			return 0, false
		}
		return value / p, true
	}
	return 0, false
}

// isGoIntegerValue reports whether v has one of Go's integer types.
func isGoIntegerValue(v any) bool {
	switch v.(type) {
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return true
	}
	return false
}

func uintToInt64(u uint64) (int64, bool) {
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

func floatToInt64(f float64) (int64, bool) {
	if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false // also rejects NaN and ±Inf
	}
	return int64(f), true
}

// hdrDecimalParts recognises an AMQP decimal (amqp.Decimal: a struct with an
// unsigned Scale and an integer Value) by its shape.
func hdrDecimalParts(v any) (scale uint64, value int64, ok bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Struct || rv.NumField() != 2 {
		return 0, 0, false
	}
	s, val := rv.FieldByName("Scale"), rv.FieldByName("Value")
	if !s.IsValid() || !val.IsValid() {
		return 0, 0, false
	}
	switch s.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
	default:
		return 0, 0, false
	}
	switch val.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
	default:
		return 0, 0, false
	}
	return s.Uint(), val.Int(), true
}

// hdrTimeLayouts are the textual timestamps accepted, tried in order. Inputs
// may carry fractional seconds after the seconds field with any layout.
var hdrTimeLayouts = []string{
	time.RFC3339,
	"2006-01-02T15:04:05Z0700",
	"2006-01-02T15:04:05",
	"2006-01-02 15:04:05 Z07:00", // NServiceBus, once its ':' fraction separator is fixed
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02 15:04:05",
	time.RFC1123Z,
	time.RFC1123,
}

// hdrTime reads a timestamp (time.Time), a textual timestamp, or Unix seconds.
// The result is in UTC (the zero time when v is the zero time.Time).
// Times outside years 1–9999 are refused: Meta must stay JSON-encodable.
func hdrTime(v any) (time.Time, bool) {
	var t time.Time
	switch tv := v.(type) {
	case time.Time:
		t = tv
	case string, []byte:
		s, _, _ := hdrString(tv, 64)
		var ok bool
		if t, ok = parseHdrTime(s); !ok {
			return time.Time{}, false
		}
	default:
		n, ok := hdrInt64(v)
		if !ok || n <= 0 || n >= 1e11 {
			return time.Time{}, false
		}
		t = time.Unix(n, 0)
	}
	t = t.UTC()
	if y := t.Year(); y < 1 || y > 9999 {
		return time.Time{}, false
	}
	return t, true
}

// parseHdrTime parses s with hdrTimeLayouts. NServiceBus writes
// "2006-01-02 15:04:05:000000 Z", a ':' before the fraction that Go cannot
// parse, so that one separator is turned into '.' first.
func parseHdrTime(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if len(s) > 20 && s[10] == ' ' && s[19] == ':' && s[20] >= '0' && s[20] <= '9' {
		s = s[:19] + "." + s[20:]
	}
	for _, layout := range hdrTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// addClampedInt returns a+b, clamped to the int range; negative b adds nothing.
func addClampedInt(a int, b int64) int {
	const maxInt = int64(^uint(0) >> 1)
	if b <= 0 {
		return a
	}
	if b > maxInt-int64(a) {
		return int(maxInt)
	}
	return a + int(b)
}

// HeaderString is a header value as a string: text and bytes as they
// are, numbers in decimal, booleans as true or false, times in RFC 3339
// (UTC); ok is false for tables, arrays and nil, which have no one
// string.
func HeaderString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case []byte:
		return string(x), true
	case bool:
		return strconv.FormatBool(x), true
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x), true
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	case time.Time:
		return x.UTC().Format(time.RFC3339), true
	case fmt.Stringer:
		return x.String(), true // amqp.Decimal and the like
	}
	return "", false
}
