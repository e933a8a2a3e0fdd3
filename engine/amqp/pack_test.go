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
// sends them, and the copies the target holds carry every header the
// originals had, exactly — on a classic queue (3.10) and a quorum queue
// (3.10, 4.0 and 4.3; a quorum queue's own delivery counters aside).
func TestAKeptMessageIsSentWithItsHeaders(t *testing.T) {
	t.Parallel()
	for _, qc := range onBrokers([]struct {
		name string
		args amqp.Table
	}{{"classic", nil}, {"quorum", testkit.Quorum(nil)}}) {
		t.Run(qc.name+"-"+qc.on.Name, func(t *testing.T) {
			t.Parallel()
			qc.on.Require(t)
			r := qc.on.Dial(t)
			q := r.Queue(testkit.Name("kept"), qc.args)
			tgt := r.Queue(testkit.Name("kept-tgt"), nil)
			msgs := testMessages(30)
			r.Publish(q, msgs...)
			r.WaitCount(q, 30, 10*time.Second)
			want := map[string]map[string]any{}
			for _, m := range msgs {
				want[m.MessageId] = map[string]any(m.Headers)
			}
			b := testBroker(t, onBroker(qc.on, Config{}))
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
			got := r.Drain(tgt, 27, 20*time.Second)
			if len(got) != 27 {
				t.Fatalf("the target holds %d copies, want 27", len(got))
			}
			for _, d := range got {
				h := withoutDeliveryCount(d.Headers)
				delete(h, copyHeader)
				if w := want[d.MessageId]; !reflect.DeepEqual(h, w) {
					t.Fatalf("%s: the copy carries\n%#v\nwant\n%#v", d.MessageId, h, w)
				}
			}
		})
	}
}
