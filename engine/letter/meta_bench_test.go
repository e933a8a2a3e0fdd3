package letter

import (
	"strings"
	"testing"
)

// BenchmarkParseMeta measures the metadata of one message per dialect: the
// broker's (its id hashes message id, body and first death), Spring with a
// 4 KB stack trace and rascal's forward (no failure time: their ids also
// hash every header), and rascal's republish then nack. Nested tables are
// plain maps, as the AMQP adapter hands them to the engine.
func BenchmarkParseMeta(b *testing.B) {
	spring := map[string]any{"x-original-exchange": "", "x-original-routingKey": "orders", "x-exception-message": "order 17 declined",
		"x-exception-stacktrace": "com.acme.Declined: order 17 declined\n" + strings.Repeat("\tat com.acme.Pay.run(Pay.java:42)\n", 120),
		"tenant":                 "acme", "__TypeId__": "com.acme.Order"}
	for _, c := range []struct {
		name string
		h    map[string]any
	}{
		{"rabbitmq", rabbitHeaders()},
		{"spring", spring},
		{"rascal-forward", plainTables(rascalForward()).(map[string]any)},
		{"rascal-republish", plainTables(rascalRepublished()).(map[string]any)},
	} {
		b.Run(c.name, func(b *testing.B) {
			m := dlqMsg(c.h)
			m.Body = []byte(strings.Repeat("x", 1024))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = ParseMeta("orders.dlq", m)
			}
		})
	}
}

// plainTables turns amqpTable values into map[string]any, recursively.
func plainTables(v any) any {
	switch x := v.(type) {
	case amqpTable:
		return plainTables(map[string]any(x))
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, y := range x {
			out[k] = plainTables(y)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, y := range x {
			out[i] = plainTables(y)
		}
		return out
	}
	return v
}
