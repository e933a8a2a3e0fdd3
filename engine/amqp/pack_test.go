package amqp

import (
	"reflect"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestPackedHeadersComeBackAsTheLibraryParsedThem: headers of every type
// AMQP carries, nested (x-death, tables in arrays in tables), sent through
// the broker and parsed by the library, then packed and unpacked as a
// cursor's kept messages are: each table comes back deep-equal, type for
// type; a value of a type the library never parses into is not packed,
// and a packing cut short never decodes.
func TestPackedHeadersComeBackAsTheLibraryParsedThem(t *testing.T) {
	t.Parallel()
	r := testkit.Dial(t)
	q := r.Queue(testkit.Name("pack"), nil)
	msgs := testMessages(40)
	msgs = append(msgs, amqp.Publishing{MessageId: "all-types", Headers: amqp.Table{
		"bool": true, "no": false, "byte": byte(7), "int8": int8(-8), "int16": int16(-1600), "uint16": uint16(1600),
		"int32": int32(-32000), "uint32": uint32(32000), "int64": int64(-1 << 40), "float32": float32(1.5),
		"float64": 2.25, "decimal": amqp.Decimal{Scale: 2, Value: 12345}, "string": "s", "empty": "",
		"bytes": []byte{0, 255}, "no-bytes": []byte{}, "time": time.Unix(1700000000, 0), "void": nil,
		"array": []any{int64(1), "two", []any{amqp.Table{"deep": amqp.Table{"deeper": int32(3)}}}, amqp.Table{}},
		"table": amqp.Table{},
	}})
	r.Publish(q, msgs...)
	for _, d := range r.Drain(q, len(msgs), 20*time.Second) {
		b, ok := packTable(d.Headers)
		if !ok {
			t.Fatalf("%s: headers %v not packed", d.MessageId, d.Headers)
		}
		got, err := unpackTable(b)
		if err != nil {
			t.Fatalf("%s: %v", d.MessageId, err)
		}
		if !reflect.DeepEqual(got, d.Headers) {
			t.Fatalf("%s: unpacked\n%#v\nwant\n%#v", d.MessageId, got, d.Headers)
		}
	}
	if _, ok := packTable(amqp.Table{"int": 1}); ok {
		t.Fatal("a Go int, which the library never parses into, was packed")
	}
	good, _ := packTable(amqp.Table{"k": []any{"v", amqp.Table{"n": int64(1)}}})
	for i := range good {
		if _, err := unpackTable(good[:i]); err == nil {
			t.Fatalf("a packed table cut to %d of %d bytes decoded", i, len(good))
		}
	}
}

// TestAKeptMessageIsSentWithItsHeaders: a cursor's move keeps messages
// for a later one (Pick.Later), their headers packed; the later move
// sends them, and the copies the broker holds carry every header the
// originals had, exactly.
func TestAKeptMessageIsSentWithItsHeaders(t *testing.T) {
	t.Parallel()
	r := testkit.Dial(t)
	q := r.Queue(testkit.Name("kept"), nil)
	tgt := r.Queue(testkit.Name("kept-tgt"), nil)
	msgs := testMessages(30)
	r.Publish(q, msgs...)
	r.WaitCount(q, 30, 10*time.Second)
	want := map[string]amqp.Table{}
	for _, m := range msgs {
		want[m.MessageId] = m.Headers
	}
	b := testBroker(t, Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL})
	ctx := t.Context()
	c, err := b.OpenCursor(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Release() }()
	// The first move keeps every message with an id; the second sends them.
	if _, err := c.Move(ctx, engine.MoveRequest{Queue: q, Pick: func(m engine.Message) (engine.Pick, bool) {
		return engine.Pick{Later: m.MessageID != ""}, false
	}}); err != nil {
		t.Fatal(err)
	}
	mr, err := c.Move(ctx, engine.MoveRequest{Queue: q, Pick: func(m engine.Message) (engine.Pick, bool) {
		return engine.Pick{ID: m.MessageID, Target: tgt}, m.MessageID != ""
	}})
	if err != nil || len(mr.Sent) != 27 {
		t.Fatalf("the second move sent %d: %v; want the 27 kept", len(mr.Sent), err)
	}
	for _, d := range r.Drain(tgt, 27, 20*time.Second) {
		h := amqp.Table{}
		for k, v := range d.Headers {
			if k != copyHeader {
				h[k] = v
			}
		}
		if w := want[d.MessageId]; !reflect.DeepEqual(map[string]any(h), map[string]any(w)) {
			t.Fatalf("%s: the copy carries\n%#v\nwant\n%#v", d.MessageId, h, w)
		}
	}
}
