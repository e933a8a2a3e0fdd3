package amqp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A cursor keeps in memory the messages a later step of its replay sends
// (Pick.Later): a filtered replay of a large DLQ keeps most of its
// selection there, up to engine.TailKeep messages. Their headers, as the
// library parses them, are maps of maps (x-death) that take more memory
// than a 1 KB body and give the collector millions of pointers to trace;
// packed, they are a few hundred bytes without a pointer. packTable and
// unpackTable turn one into the other exactly: every type the library
// parses a header value into comes back as that type, with its value.

// errPacked is a packed table that does not decode (never written by
// packTable).
var errPacked = errors.New("amqp: a kept message's packed headers do not decode")

// packTable encodes t; ok is false when a value has a type the library
// never parses into (the caller then keeps the table as it is).
func packTable(t amqp.Table) (b []byte, ok bool) {
	b, ok = appendTable(make([]byte, 0, 256), t)
	return b, ok
}

func appendTable(b []byte, t amqp.Table) ([]byte, bool) {
	b = binary.AppendUvarint(b, uint64(len(t)))
	for k, v := range t {
		b = appendString(b, k)
		var ok bool
		if b, ok = appendValue(b, v); !ok {
			return nil, false
		}
	}
	return b, true
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendValue(b []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(b, 'V'), true
	case bool:
		if v {
			return append(b, 't', 1), true
		}
		return append(b, 't', 0), true
	case byte:
		return append(b, 'B', v), true
	case int8:
		return append(b, 'b', byte(v)), true
	case int16:
		return binary.BigEndian.AppendUint16(append(b, 's'), uint16(v)), true
	case uint16:
		return binary.BigEndian.AppendUint16(append(b, 'u'), v), true
	case int32:
		return binary.BigEndian.AppendUint32(append(b, 'I'), uint32(v)), true
	case uint32:
		return binary.BigEndian.AppendUint32(append(b, 'i'), v), true
	case int64:
		return binary.BigEndian.AppendUint64(append(b, 'l'), uint64(v)), true
	case float32:
		return binary.BigEndian.AppendUint32(append(b, 'f'), math.Float32bits(v)), true
	case float64:
		return binary.BigEndian.AppendUint64(append(b, 'd'), math.Float64bits(v)), true
	case amqp.Decimal:
		return binary.BigEndian.AppendUint32(append(b, 'D', v.Scale), uint32(v.Value)), true
	case string:
		return appendString(append(b, 'S'), v), true
	case []byte:
		b = binary.AppendUvarint(append(b, 'x'), uint64(len(v)))
		return append(b, v...), true
	case time.Time:
		b = binary.BigEndian.AppendUint64(append(b, 'T'), uint64(v.Unix()))
		return binary.BigEndian.AppendUint32(b, uint32(v.Nanosecond())), true
	case amqp.Table:
		return appendTable(append(b, 'F'), v)
	case []any:
		b = binary.AppendUvarint(append(b, 'A'), uint64(len(v)))
		for _, e := range v {
			var ok bool
			if b, ok = appendValue(b, e); !ok {
				return nil, false
			}
		}
		return b, true
	}
	return nil, false
}

// unpackTable decodes what packTable wrote.
func unpackTable(b []byte) (amqp.Table, error) {
	d := unpacker{b: b}
	t := d.table()
	if d.err != nil || len(d.b) != 0 {
		return nil, errPacked
	}
	return t, nil
}

// unpacker reads a packed table; the first error sticks.
type unpacker struct {
	b   []byte
	err error
}

func (d *unpacker) fail() {
	if d.err == nil {
		d.err = errPacked
	}
}

func (d *unpacker) take(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		d.fail()
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *unpacker) count() int {
	n, w := binary.Uvarint(d.b)
	if w <= 0 || n > uint64(len(d.b)) { // every entry takes at least a byte
		d.fail()
		return 0
	}
	d.b = d.b[w:]
	return int(n)
}

func (d *unpacker) str() string { return string(d.take(d.count())) }

func (d *unpacker) table() amqp.Table {
	n := d.count()
	t := make(amqp.Table, n)
	for i := 0; i < n && d.err == nil; i++ {
		k := d.str()
		t[k] = d.value()
	}
	return t
}

func (d *unpacker) value() any {
	tag := d.take(1)
	if d.err != nil {
		return nil
	}
	switch tag[0] {
	case 'V':
		return nil
	case 't':
		if v := d.take(1); v != nil {
			return v[0] != 0
		}
	case 'B':
		if v := d.take(1); v != nil {
			return v[0]
		}
	case 'b':
		if v := d.take(1); v != nil {
			return int8(v[0])
		}
	case 's':
		if v := d.take(2); v != nil {
			return int16(binary.BigEndian.Uint16(v))
		}
	case 'u':
		if v := d.take(2); v != nil {
			return binary.BigEndian.Uint16(v)
		}
	case 'I':
		if v := d.take(4); v != nil {
			return int32(binary.BigEndian.Uint32(v))
		}
	case 'i':
		if v := d.take(4); v != nil {
			return binary.BigEndian.Uint32(v)
		}
	case 'l':
		if v := d.take(8); v != nil {
			return int64(binary.BigEndian.Uint64(v))
		}
	case 'f':
		if v := d.take(4); v != nil {
			return math.Float32frombits(binary.BigEndian.Uint32(v))
		}
	case 'd':
		if v := d.take(8); v != nil {
			return math.Float64frombits(binary.BigEndian.Uint64(v))
		}
	case 'D':
		if v := d.take(5); v != nil {
			return amqp.Decimal{Scale: v[0], Value: int32(binary.BigEndian.Uint32(v[1:]))}
		}
	case 'S':
		return d.str()
	case 'x':
		if v := d.take(d.count()); v != nil {
			out := make([]byte, len(v)) // never nil, as the library's
			copy(out, v)
			return out
		}
	case 'T':
		if v := d.take(12); v != nil {
			return time.Unix(int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint32(v[8:])))
		}
	case 'F':
		return d.table()
	case 'A':
		n := d.count()
		a := make([]any, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			a = append(a, d.value())
		}
		return a
	default:
		d.fail()
	}
	return nil
}

// packHeld returns h with its headers packed (h.packed) when they can be.
func packHeld(h held) held {
	if h.packed != nil || h.d.Headers == nil {
		return h
	}
	if b, ok := packTable(h.d.Headers); ok {
		h.packed, h.d.Headers = b, nil
	}
	return h
}

// unpackHeld returns h with its headers as the library gave them.
func unpackHeld(h held) (held, error) {
	if h.packed == nil {
		return h, nil
	}
	t, err := unpackTable(h.packed)
	if err != nil {
		return h, fmt.Errorf("amqp: message %d of the read: %w", h.seq, err)
	}
	h.d.Headers, h.packed = t, nil
	return h, nil
}
