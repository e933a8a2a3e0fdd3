package letter

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The fuzz input encodes a header table in a small self-describing format:
// every value is a tag byte followed by its payload, so random bytes decode
// into nested tables, arrays and scalars of every type amqp091-go produces
// (and the named types it uses). Keys come from fuzzKeys by index, so the
// fuzzer reaches the interesting headers quickly.
const (
	tagNil = iota
	tagString
	tagBytes
	tagInt8
	tagUint8
	tagInt16
	tagUint16
	tagInt32
	tagUint32
	tagInt64
	tagUint64
	tagFloat32
	tagFloat64
	tagBool
	tagTime
	tagDecimal
	tagTable
	tagNamedTable
	tagArray
	tagTypedArray // []map[string]any
	tagBigArray   // one value repeated up to 65,535 times
	tagBigString  // one byte repeated up to 1 MB
	tagCount
)

var fuzzKeys = []string{
	"x-death", "queue", "reason", "count", "time", "exchange", "routing-keys", "original-expiration",
	"x-first-death-queue", "x-first-death-reason", "x-first-death-exchange",
	"x-last-death-queue", "x-last-death-reason", "x-last-death-exchange",
	"x-exception-message", "x-exception-stacktrace", "x-exception-type", "x-original-exchange", "x-original-routingKey",
	"MT-Reason", "MT-Fault-ExceptionType", "MT-Fault-Message", "MT-Fault-StackTrace", "MT-Fault-Timestamp",
	"MT-Fault-InputAddress", "MT-Fault-RetryCount", "MT-Host-MachineName",
	"NServiceBus.FailedQ", "NServiceBus.TimeOfFailure", "NServiceBus.ExceptionInfo.ExceptionType",
	"NServiceBus.ExceptionInfo.Message", "NServiceBus.ExceptionInfo.StackTrace",
	"x-replay-id", "x-replay-count", "stroma.dlq.replayed_from", "x-delivery-count", "x-acquired-count",
}

// fuzzDecoder turns bytes into header values; it stops at the end of its
// input and bounds depth and node count, so every input decodes quickly.
type fuzzDecoder struct {
	b     []byte
	nodes int
	// inBig is how many big arrays enclose the value being decoded: only
	// the outermost may be long, or a few bytes would stand for billions
	// of values (65,535 repeated 65,535 times) and stall the fuzzer on the
	// decoder's output rather than on anything a broker could send.
	inBig int
}

func (d *fuzzDecoder) byte() byte {
	if len(d.b) == 0 {
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *fuzzDecoder) uint(n int) uint64 {
	var buf [8]byte
	k := copy(buf[8-n:], d.b)
	d.b = d.b[k:]
	return binary.BigEndian.Uint64(buf[:])
}

func (d *fuzzDecoder) bytes() []byte {
	n := min(int(d.byte()), len(d.b))
	out := append([]byte(nil), d.b[:n]...)
	d.b = d.b[n:]
	return out
}

func (d *fuzzDecoder) key() string {
	k := d.byte()
	if int(k) < len(fuzzKeys) {
		return fuzzKeys[k]
	}
	return string(d.bytes())
}

func (d *fuzzDecoder) table(depth int) map[string]any {
	n := int(d.byte())
	t := make(map[string]any, min(n, 16))
	for i := 0; i < n && len(d.b) > 0; i++ {
		k := d.key()
		t[k] = d.value(depth + 1)
	}
	return t
}

func (d *fuzzDecoder) value(depth int) any {
	d.nodes++
	if len(d.b) == 0 || depth > 5 || d.nodes > 2000 {
		return nil
	}
	switch d.byte() % tagCount {
	case tagString:
		return string(d.bytes())
	case tagBytes:
		return d.bytes()
	case tagInt8:
		return int8(d.uint(1))
	case tagUint8:
		return uint8(d.uint(1))
	case tagInt16:
		return int16(d.uint(2))
	case tagUint16:
		return uint16(d.uint(2))
	case tagInt32:
		return int32(d.uint(4))
	case tagUint32:
		return uint32(d.uint(4))
	case tagInt64:
		return int64(d.uint(8))
	case tagUint64:
		return d.uint(8)
	case tagFloat32:
		return math.Float32frombits(uint32(d.uint(4)))
	case tagFloat64:
		return math.Float64frombits(d.uint(8))
	case tagBool:
		return d.byte()&1 == 1
	case tagTime:
		return time.Unix(int64(d.uint(8)), 0).UTC()
	case tagDecimal:
		return amqpDecimal{Scale: d.byte(), Value: int32(d.uint(4))}
	case tagTable:
		return d.table(depth)
	case tagNamedTable:
		return amqpTable(d.table(depth))
	case tagArray:
		n := int(d.byte())
		a := make([]any, 0, min(n, 16))
		for i := 0; i < n && len(d.b) > 0; i++ {
			a = append(a, d.value(depth+1))
		}
		return a
	case tagTypedArray:
		n := int(d.byte())
		var a []map[string]any
		for i := 0; i < n && len(d.b) > 0; i++ {
			a = append(a, d.table(depth+1))
		}
		return a
	case tagBigArray:
		n := int(d.uint(2))
		if d.inBig > 0 {
			n = min(n, 8)
		}
		d.inBig++
		v := d.value(depth + 1)
		d.inBig--
		a := make([]any, n)
		for i := range a {
			a[i] = v
		}
		return a
	case tagBigString:
		return strings.Repeat(string(rune(d.byte())), int(d.uint(1))<<12)
	}
	return nil
}

// fuzzEncode is fuzzDecoder's inverse for the values the seeds use.
func fuzzEncode(v any) []byte {
	var out []byte
	var enc func(v any)
	encTable := func(t map[string]any) {
		out = append(out, byte(len(t)))
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys) // seeds are the same bytes on every run
		for _, k := range keys {
			v := t[k]
			i := 0
			for i < len(fuzzKeys) && fuzzKeys[i] != k {
				i++
			}
			if i < len(fuzzKeys) {
				out = append(out, byte(i))
			} else {
				out = append(out, 255, byte(min(len(k), 255)))
				out = append(out, k[:min(len(k), 255)]...)
			}
			enc(v)
		}
	}
	num := func(tag byte, n int, u uint64) {
		out = append(out, tag)
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], u)
		out = append(out, buf[8-n:]...)
	}
	enc = func(v any) {
		switch t := v.(type) {
		case nil:
			out = append(out, tagNil)
		case string:
			out = append(out, tagString, byte(min(len(t), 255)))
			out = append(out, t[:min(len(t), 255)]...)
		case []byte:
			out = append(out, tagBytes, byte(min(len(t), 255)))
			out = append(out, t[:min(len(t), 255)]...)
		case int8:
			num(tagInt8, 1, uint64(t))
		case uint16:
			num(tagUint16, 2, uint64(t))
		case int32:
			num(tagInt32, 4, uint64(t))
		case int64:
			num(tagInt64, 8, uint64(t))
		case time.Time:
			num(tagTime, 8, uint64(t.Unix()))
		case map[string]any:
			out = append(out, tagTable)
			encTable(t)
		case amqpTable:
			out = append(out, tagNamedTable)
			encTable(t)
		case []any:
			out = append(out, tagArray, byte(len(t)))
			for _, e := range t {
				enc(e)
			}
		default:
			panic("fuzzEncode: unsupported " + reflect.TypeOf(v).String())
		}
	}
	encTable(v.(map[string]any))
	return out
}

// fuzzSeed is one seed message: the queue it was read from and its headers.
type fuzzSeed struct {
	dlq string
	h   map[string]any
}

// fuzzSeeds are one message per dialect, plus a replayed and an unknown one.
func fuzzSeeds() []fuzzSeed {
	return []fuzzSeed{
		{"orders.dlq", rabbitHeaders()},
		{"pay.dlq", map[string]any{"x-death": []any{map[string]any{"queue": "pay", "reason": "delivery_limit", "count": int64(5), "time": tDeath2}},
			"x-last-death-queue": "pay", "x-last-death-reason": "delivery_limit", "x-replay-id": "r1", "x-replay-count": int32(1)}},
		{"orders.errors", map[string]any{"x-exception-message": "Order 123 failed", "x-original-exchange": "orders-x",
			"x-exception-stacktrace": "com.acme.OrderException: Order 123 failed\n\tat x", "x-original-routingKey": "order.created"}},
		{"submit-order_error", map[string]any{"MT-Reason": "fault", "MT-Fault-Message": "bad", "MT-Fault-RetryCount": int32(2),
			"MT-Fault-InputAddress": "rabbitmq://h/v/submit-order?bind=true", "MT-Fault-Timestamp": "2024-03-01T10:00:00.1234567Z"}},
		{"submit-order_skipped", map[string]any{"MT-Reason": "dead-letter", "MT-Host-MachineName": "web-1"}},
		{"error", map[string]any{"NServiceBus.FailedQ": "Sales@M1", "NServiceBus.TimeOfFailure": "2024-03-01 10:00:00:123456 Z",
			"NServiceBus.ExceptionInfo.ExceptionType": "System.Exception", "NServiceBus.ExceptionInfo.Message": "x 1"}},
		{"orders.dlq", map[string]any{"app": "x", "x-replay-count": "2"}},
		{"payments.dlq", map[string]any{"CC": []any{"payments.payments"}, "rascal": map[string]any{
			"originalQueue": "payments", "error": map[string]any{"message": "payment 1 declined", "code": "E_DECLINED"},
			"recovery": map[string]any{"payments": map[string]any{"forwarded": int8(1), "immediateNack": int8(1),
				"xDeath": map[string]any{"count": int8(0)}}}}}},
		{"billing.dlq", map[string]any{"x-app-source": "billing", "x-app-error": "invoice 7 locked", "x-app-attempts": int8(3),
			"x-app-failed-at": "2026-11-30T12:00:00Z"}},
	}
}

// fuzzDialect is the in-house dialect FuzzParseMeta reads headers with.
var fuzzDialect = HeaderDialect{Source: "x-app-source", Exception: "x-app-error", Attempts: "x-app-attempts", Time: "x-app-failed-at"}

// TestFuzzEncodingRoundTrip checks that the seeds decode to the headers
// they were made from, so the corpus really covers each dialect.
func TestFuzzEncodingRoundTrip(t *testing.T) {
	for _, s := range fuzzSeeds() {
		d := &fuzzDecoder{b: fuzzEncode(s.h)}
		if got := d.table(0); !reflect.DeepEqual(got, s.h) || len(d.b) != 0 {
			t.Errorf("round trip:\n got %#v\nwant %#v", got, s.h)
		}
	}
}

func FuzzParseMeta(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s.dlq, "m-1", []byte(`{"a":1}`), fuzzEncode(s.h))
	}
	// x-death with 10,000 copies of {queue: "q"}.
	f.Add("q", "", []byte{}, []byte{1, 0, tagBigArray, 0x27, 0x10, tagTable, 1, 1, tagString, 1, 'q'})

	f.Fuzz(func(t *testing.T, dlq, messageID string, body, enc []byte) {
		d := &fuzzDecoder{b: enc}
		h := d.table(0)
		m := Message{Seq: 1, Headers: h, MessageID: messageID, Body: body, Timestamp: time.Unix(1700000000, 0)}
		meta := ParseMetaDialect(dlq, m, fuzzDialect)
		if !metaIDRE.MatchString(meta.ID) {
			t.Fatalf("ID %q", meta.ID)
		}
		for _, p := range meta.Problems {
			if strings.Contains(p, "internal error") {
				t.Fatalf("ParseMeta panicked: %s", p)
			}
		}
		if again := ParseMetaDialect(dlq, m, fuzzDialect); !reflect.DeepEqual(meta, again) {
			t.Fatalf("not deterministic:\n%+v\n%+v", meta, again)
		}
		if len(meta.Problems) > maxProblems+1 || len(meta.Exception) > maxExceptionLen ||
			len(meta.Source) > maxNameLen || utf8.RuneCountInString(meta.FailureGroup) > groupMaxLen {
			t.Fatalf("unbounded meta: %+v", meta)
		}
		if _, err := json.Marshal(meta); err != nil {
			t.Fatalf("meta does not encode: %v", err)
		}
		if meta.Returned && meta.ReplayID == "" {
			t.Fatal("returned without a replay id")
		}
		if meta.Source != "" && meta.NeedsRoute {
			t.Fatal("source and needs_route both set")
		}

		rh := ReplayHeaders(h, meta.ID, meta.Source)
		for k := range rh {
			if IsRemovedHeader(k) {
				t.Fatalf("replayed copy keeps %q", k)
			}
		}
		if n, ok := rh[HeaderReplayCount].(int32); !ok || n < 1 || rh[HeaderReplayID] != meta.ID {
			t.Fatalf("replay headers %v %v", rh[HeaderReplayCount], rh[HeaderReplayID])
		}
		for k := range h {
			if _, kept := rh[k]; !kept && !IsRemovedHeader(k) {
				t.Fatalf("header %q lost", k)
			}
		}
		back := ParseMetaDialect(dlq, Message{Headers: rh, MessageID: messageID, Body: body, Timestamp: m.Timestamp}, fuzzDialect)
		if back.ReplayCount != int(rh[HeaderReplayCount].(int32)) || back.ReplayID != meta.ID {
			t.Fatalf("replayed copy reads count %d id %q", back.ReplayCount, back.ReplayID)
		}
		if back.ID == meta.ID {
			t.Fatal("replayed copy shares the original's id")
		}
	})
}
