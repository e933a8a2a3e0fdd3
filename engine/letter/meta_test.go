package letter

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// amqpTable and amqpDecimal have the shapes of amqp091-go's Table and
// Decimal, which engine must read without importing amqp091-go.
type (
	amqpTable   map[string]interface{}
	amqpDecimal struct {
		Scale uint8
		Value int32
	}
)

var (
	tDeath1 = time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	tDeath2 = time.Date(2024, 3, 1, 9, 5, 0, 0, time.UTC)
	tDeath3 = time.Date(2024, 3, 1, 9, 10, 0, 0, time.UTC)
)

var metaIDRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

// rabbitHeaders is a RabbitMQ 3.10 dead-lettered message (no x-last-death-*):
// rejected from orders three times, after an earlier retry loop through
// orders.wait.
func rabbitHeaders() map[string]any {
	return map[string]any{
		"x-death": []any{
			amqpTable{"queue": "orders", "reason": "rejected", "count": int64(3), "time": tDeath3,
				"exchange": "orders-x", "routing-keys": []any{"order.created"}},
			amqpTable{"queue": "orders.wait", "reason": "expired", "count": int64(2), "time": tDeath2,
				"exchange": "", "routing-keys": []any{"orders.wait"}, "original-expiration": "5000"},
			amqpTable{"queue": "orders", "reason": "expired", "count": int64(1), "time": tDeath1,
				"exchange": "orders-x", "routing-keys": []any{"order.created"}},
		},
		"x-first-death-queue":    "orders",
		"x-first-death-reason":   "expired",
		"x-first-death-exchange": "orders-x",
		"content-origin":         "checkout",
	}
}

func dlqMsg(h map[string]any) Message {
	return Message{Seq: 4, Headers: h, MessageID: "m-1", Body: []byte(`{"order":42}`),
		Timestamp: tDeath1, ContentType: "application/json"}
}

func TestParseMetaDialects(t *testing.T) {
	mtTime := time.Date(2024, 3, 1, 10, 0, 0, 123456700, time.UTC)
	nsbTime := time.Date(2024, 3, 1, 10, 0, 0, 123456000, time.UTC)
	tests := []struct {
		name string
		dlq  string
		h    map[string]any
		want Meta
	}{
		{"rabbitmq 3.10", "orders.dlq", rabbitHeaders(), Meta{
			Dialect: DialectRabbitMQ, Source: "orders", Exchange: "orders-x", RoutingKeys: []string{"order.created"},
			Reason: ReasonRejected, Attempts: 4, FirstDeath: tDeath1, LastDeath: tDeath3, FailureGroup: "rejected"}},
		{"rabbitmq x-last-death wins", "pay.dlq", map[string]any{
			"x-death": []any{
				map[string]any{"queue": "orders", "reason": "rejected", "count": int64(1), "time": tDeath3, "exchange": "x1", "routing-keys": []any{"a"}},
				map[string]any{"queue": "payments", "reason": "delivery_limit", "count": int64(5), "time": tDeath2, "exchange": "x2", "routing-keys": []any{"b", "c"}},
			},
			"x-last-death-queue": "payments", "x-last-death-reason": "delivery_limit", "x-last-death-exchange": "x2",
			"x-first-death-queue": "payments", "x-first-death-reason": "delivery_limit", "x-first-death-exchange": "x2",
		}, Meta{Dialect: DialectRabbitMQ, Source: "payments", Exchange: "x2", RoutingKeys: []string{"b", "c"},
			Reason: ReasonDeliveryLimit, Attempts: 5, FirstDeath: tDeath2, LastDeath: tDeath3, FailureGroup: "delivery_limit"}},
		{"rabbitmq first-death only", "q.dlq", map[string]any{
			"x-first-death-queue": "q", "x-first-death-reason": "maxlen", "x-first-death-exchange": "",
		}, Meta{Dialect: DialectRabbitMQ, Source: "q", Reason: ReasonMaxLen, FailureGroup: "maxlen"}},
		{"spring default exchange", "orders.errors", map[string]any{
			"x-exception-message":    "Order 123 has no customer",
			"x-exception-stacktrace": "com.acme.OrderException: Order 123 has no customer\n\tat com.acme.Listener.on(Listener.java:42)\n",
			"x-original-exchange":    "",
			"x-original-routingKey":  "orders",
		}, Meta{Dialect: DialectSpring, Source: "orders", RoutingKeys: []string{"orders"}, Reason: ReasonException,
			ExceptionType: "com.acme.OrderException", Exception: "Order 123 has no customer",
			FailureGroup: "com.acme.OrderException: Order <n> has no customer"}},
		{"spring x-exception-type", "orders.errors", map[string]any{
			"x-exception-message": "boom", "x-exception-type": "java.lang.IllegalStateException",
			"x-original-exchange": "", "x-original-routingKey": []byte("orders"),
		}, Meta{Dialect: DialectSpring, Source: "orders", RoutingKeys: []string{"orders"}, Reason: ReasonException,
			ExceptionType: "java.lang.IllegalStateException", Exception: "boom",
			FailureGroup: "java.lang.IllegalStateException: boom"}},
		{"spring named exchange needs route", "orders.errors", map[string]any{
			"x-exception-message": "boom", "x-original-exchange": "orders-x", "x-original-routingKey": "order.created",
		}, Meta{Dialect: DialectSpring, NeedsRoute: true, Exchange: "orders-x", RoutingKeys: []string{"order.created"},
			SourceNote: `published to exchange "orders-x" with routing key "order.created": the source queue must be resolved through the exchange's bindings`,
			Reason:     ReasonException, Exception: "boom", FailureGroup: "boom"}},
		{"masstransit fault", "submit-order_error", map[string]any{
			"MT-Reason":              "fault",
			"MT-Fault-ExceptionType": "System.InvalidOperationException",
			"MT-Fault-Message":       "Order 8f14e45f-ceea-467f-a0e6-3f2b1c9d4e21 not found",
			"MT-Fault-StackTrace":    "   at Consumer.Consume()",
			"MT-Fault-Timestamp":     "2024-03-01T10:00:00.1234567Z",
			"MT-Fault-InputAddress":  "rabbitmq://mq.local/prod/submit-order?bind=true&durable=true",
			"MT-Fault-RetryCount":    int32(2),
			"MT-Host-MachineName":    "web-1",
		}, Meta{Dialect: DialectMassTransit, Source: "submit-order", Reason: ReasonException, Attempts: 3,
			FirstDeath: mtTime, LastDeath: mtTime, ExceptionType: "System.InvalidOperationException",
			Exception:    "Order 8f14e45f-ceea-467f-a0e6-3f2b1c9d4e21 not found",
			FailureGroup: "System.InvalidOperationException: Order <uuid> not found"}},
		{"masstransit short address", "x_error", map[string]any{
			"MT-Fault-Message": "bad", "MT-Fault-InputAddress": "queue:billing", "MT-Fault-RetryCount": "0",
		}, Meta{Dialect: DialectMassTransit, Source: "billing", Reason: ReasonException, Attempts: 1,
			Exception: "bad", FailureGroup: "bad"}},
		{"masstransit skipped from queue name", "submit-order_skipped", map[string]any{
			"MT-Reason": "dead-letter", "MT-Host-MachineName": "web-1",
		}, Meta{Dialect: DialectMassTransit, Source: "submit-order", Reason: ReasonSkipped, FailureGroup: "skipped",
			SourceNote: "derived from the queue name (no usable MT-Fault-InputAddress)"}},
		{"masstransit error from queue name", "submit-order_error", map[string]any{
			"MT-Fault-ExceptionType": "System.TimeoutException", "MT-Fault-Message": "timed out after 30000ms",
		}, Meta{Dialect: DialectMassTransit, Source: "submit-order", Reason: ReasonException,
			SourceNote:    "derived from the queue name (no usable MT-Fault-InputAddress)",
			ExceptionType: "System.TimeoutException", Exception: "timed out after 30000ms",
			FailureGroup: "System.TimeoutException: timed out after <n>ms"}},
		{"nservicebus", "error", map[string]any{
			"NServiceBus.FailedQ":                     "Sales@MACHINE-01",
			"NServiceBus.TimeOfFailure":               "2024-03-01 10:00:00:123456 Z",
			"NServiceBus.ExceptionInfo.ExceptionType": "System.ArgumentException",
			"NServiceBus.ExceptionInfo.Message":       "Amount 12.50 exceeds limit 10",
			"NServiceBus.ExceptionInfo.StackTrace":    "at Sales.Handler.Handle()",
		}, Meta{Dialect: DialectNServiceBus, Source: "Sales", Reason: ReasonException, FirstDeath: nsbTime,
			LastDeath: nsbTime, ExceptionType: "System.ArgumentException", Exception: "Amount 12.50 exceeds limit 10",
			FailureGroup: "System.ArgumentException: Amount <n> exceeds limit <n>"}},
		{"nservicebus rfc3339", "error", map[string]any{
			"NServiceBus.FailedQ": "Billing", "NServiceBus.TimeOfFailure": "2024-03-01T09:00:00Z",
			"NServiceBus.ExceptionInfo.Message": "x",
		}, Meta{Dialect: DialectNServiceBus, Source: "Billing", Reason: ReasonException, FirstDeath: tDeath1,
			LastDeath: tDeath1, Exception: "x", FailureGroup: "x"}},
		{"unknown", "orders.dlq", map[string]any{"app": "checkout"}, Meta{Dialect: DialectUnknown,
			SourceNote: "no dead-letter headers (x-death, x-first-death-*, Spring, MassTransit, NServiceBus, rascal) found: the source queue cannot be derived",
			Reason:     ReasonUnknown, FailureGroup: "unknown"}},
		{"unknown, no headers", "orders.dlq", nil, Meta{Dialect: DialectUnknown,
			SourceNote: "no dead-letter headers (x-death, x-first-death-*, Spring, MassTransit, NServiceBus, rascal) found: the source queue cannot be derived",
			Reason:     ReasonUnknown, FailureGroup: "unknown"}},
		{"unknown, _error without MassTransit headers", "orders_error", map[string]any{"app": "x"}, Meta{Dialect: DialectUnknown,
			SourceNote: "no dead-letter headers (x-death, x-first-death-*, Spring, MassTransit, NServiceBus, rascal) found: the source queue cannot be derived",
			Reason:     ReasonUnknown, FailureGroup: "unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := dlqMsg(tt.h)
			got := ParseMeta(tt.dlq, m)
			if !metaIDRE.MatchString(got.ID) {
				t.Errorf("ID = %q, want 16 lowercase hex", got.ID)
			}
			want := tt.want
			want.ID, want.Seq, want.MessageID, want.Size = got.ID, 4, "m-1", len(m.Body)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ParseMeta:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestParseMetaMalformed feeds headers no real broker writes: each must give
// a problem note, never a panic, and keep what could be read.
func TestParseMetaMalformed(t *testing.T) {
	okEntry := func() map[string]any {
		return map[string]any{"queue": "orders", "reason": "rejected", "count": int64(2), "time": tDeath2,
			"exchange": "ox", "routing-keys": []any{"k"}}
	}
	with := func(k string, v any) map[string]any { e := okEntry(); e[k] = v; return e }
	huge := make([]any, 10000)
	for i := range huge {
		huge[i] = map[string]any{"queue": "orders", "reason": "rejected", "count": int64(1), "time": tDeath1.Add(time.Duration(-i) * time.Second)}
	}
	mb := strings.Repeat("é", 1<<19) // 1 MiB
	tests := []struct {
		name    string
		dlq     string
		h       map[string]any
		problem string
		check   func(t *testing.T, m Meta)
	}{
		{"x-death string", "d", map[string]any{"x-death": "orders", "x-first-death-queue": "orders"},
			"x-death: expected array, got string", func(t *testing.T, m Meta) { wantEq(t, m.Source, "orders") }},
		{"x-death table", "d", map[string]any{"x-death": okEntry()},
			"x-death: expected array, got table", func(t *testing.T, m Meta) { wantEq(t, m.Source, ""); wantNonEmpty(t, m.SourceNote) }},
		{"entry wrong type", "d", map[string]any{"x-death": []any{"oops", okEntry()}},
			"x-death[0]: expected table, got string", func(t *testing.T, m Meta) {
				wantEq(t, m.Source, "") // x-death[1] is not the newest death: no guess
				wantNonEmpty(t, m.SourceNote)
			}},
		{"count as string", "d", map[string]any{"x-death": []any{with("count", "3")}},
			`x-death[0].count: expected integer, got string "3"`, func(t *testing.T, m Meta) {
				wantEq(t, m.Source, "orders")
				wantEq(t, m.Attempts, 0)
			}},
		{"count as decimal", "d", map[string]any{"x-death": []any{with("count", amqpDecimal{Value: 3})}},
			"x-death[0].count: expected integer, got decimal", nil},
		{"time as string", "d", map[string]any{"x-death": []any{with("time", "2024-03-01T09:00:00Z")}},
			"x-death[0].time: expected timestamp, got string", func(t *testing.T, m Meta) {
				wantEq(t, m.LastDeath, time.Time{})
				wantEq(t, m.Attempts, 2)
			}},
		{"routing-keys as string", "d", map[string]any{"x-death": []any{with("routing-keys", "k")}},
			"x-death[0].routing-keys: expected array, got string", func(t *testing.T, m Meta) {
				wantEq(t, strings.Join(m.RoutingKeys, ","), "k")
			}},
		{"routing key of wrong type", "d", map[string]any{"x-death": []any{with("routing-keys", []any{"a", 7, nil})}},
			"x-death[0].routing-keys[1]: expected string, got integer", nil},
		{"queue as table", "d", map[string]any{"x-death": []any{with("queue", amqpTable{"a": 1})}},
			"x-death[0].queue: expected string, got table", func(t *testing.T, m Meta) { wantEq(t, m.Source, "") }},
		{"queue missing", "d", map[string]any{"x-death": []any{map[string]any{"reason": "expired"}}},
			"x-death[0].queue: missing", func(t *testing.T, m Meta) { wantEq(t, m.Reason, ReasonExpired) }},
		{"unknown reason", "d", map[string]any{"x-death": []any{with("reason", "gremlins")}},
			`dead-letter reason "gremlins" not recognised`, func(t *testing.T, m Meta) { wantEq(t, m.Reason, ReasonUnknown) }},
		{"negative count", "d", map[string]any{"x-death": []any{with("count", int64(-4))}},
			"x-death[0].count: negative (-4)", nil},
		{"10,000 x-death entries", "d", map[string]any{"x-death": huge},
			"x-death: 10000 entries, only the first 64 and the last read", func(t *testing.T, m Meta) {
				wantEq(t, m.Source, "orders")
				wantEq(t, m.Attempts, 65)
				wantEq(t, m.FirstDeath, tDeath1.Add(-9999*time.Second))
			}},
		{"1 MB exception", "d", map[string]any{"x-exception-message": mb, "x-original-exchange": "", "x-original-routingKey": "q"},
			"x-exception-message: longer than 2000 bytes, truncated", func(t *testing.T, m Meta) {
				wantEq(t, len(m.Exception), 2000)
				wantEq(t, m.Source, "q")
				if len(m.FailureGroup) > 400 {
					t.Errorf("failure group is %d bytes", len(m.FailureGroup))
				}
			}},
		{"1 MB exception as bytes", "q_error", map[string]any{"MT-Fault-Message": []byte(mb)},
			"MT-Fault-Message: longer than 2000 bytes, truncated", func(t *testing.T, m Meta) { wantEq(t, len(m.Exception), 2000) }},
		{"nil x-death", "d", map[string]any{"x-death": nil}, "x-death: expected array, got nil", nil},
		{"nil first-death queue", "d", map[string]any{"x-first-death-queue": nil, "x-first-death-reason": "expired"},
			"x-first-death-queue: expected string, got nil", func(t *testing.T, m Meta) { wantEq(t, m.Reason, ReasonExpired) }},
		{"nil MassTransit fields", "q_error", map[string]any{"MT-Fault-Message": nil, "MT-Fault-RetryCount": nil},
			"MT-Fault-Message: expected string, got nil", func(t *testing.T, m Meta) { wantEq(t, m.Source, "q") }},
		{"nested table as Spring routing key", "d", map[string]any{"x-exception-message": "x", "x-original-exchange": "",
			"x-original-routingKey": map[string]any{"nested": map[string]any{"deeper": []any{1}}}},
			"x-original-routingKey: expected string, got table", func(t *testing.T, m Meta) { wantEq(t, m.Source, "") }},
		{"replay count unreadable", "d", map[string]any{"x-replay-count": "many"},
			`x-replay-count: expected integer, got string "many"`, nil},
		{"replay id as table", "d", map[string]any{"x-replay-id": amqpTable{}}, "x-replay-id: expected string, got table", nil},
		{"MassTransit retry count as text", "q_error", map[string]any{"MT-Fault-RetryCount": "two"},
			`MT-Fault-RetryCount: expected integer, got string "two"`, nil},
		{"NServiceBus time unreadable", "error", map[string]any{"NServiceBus.FailedQ": "q", "NServiceBus.TimeOfFailure": "yesterday"},
			`NServiceBus.TimeOfFailure: expected timestamp, got string "yesterday"`, func(t *testing.T, m Meta) { wantEq(t, m.Source, "q") }},
		{"time out of range", "d", map[string]any{"x-death": []any{with("time", time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC))}},
			"x-death[0].time: timestamp out of range", func(t *testing.T, m Meta) { wantEq(t, m.LastDeath, time.Time{}) }},
		{"queue name too long", "d", map[string]any{"x-first-death-queue": strings.Repeat("q", 300)},
			"x-first-death-queue: longer than 255 bytes, not a valid name", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ParseMeta(tt.dlq, dlqMsg(tt.h))
			if !metaIDRE.MatchString(m.ID) {
				t.Errorf("ID = %q", m.ID)
			}
			if !hasProblem(m.Problems, tt.problem) {
				t.Errorf("Problems = %q, want one %q", m.Problems, tt.problem)
			}
			for _, p := range m.Problems {
				if strings.Contains(p, "internal error") {
					t.Errorf("recovered panic: %s", p)
				}
			}
			if tt.check != nil {
				tt.check(t, m)
			}
		})
	}
}

func TestParseMetaProblemsCapped(t *testing.T) {
	entries := make([]any, 100)
	for i := range entries {
		entries[i] = "bad"
	}
	m := ParseMeta("d", dlqMsg(map[string]any{"x-death": entries}))
	if len(m.Problems) != maxProblems+1 || !strings.HasSuffix(m.Problems[maxProblems], "more problems not listed") {
		t.Fatalf("Problems = %d: %q", len(m.Problems), m.Problems)
	}
}

func TestParseMetaNamedTypes(t *testing.T) {
	// The same RabbitMQ message decoded with plain maps and with amqp091's
	// named types (and other integer widths) reads the same.
	plain := rabbitHeaders()
	named := rabbitHeaders()
	var entries []map[string]any // a typed slice rather than []any
	for _, e := range named["x-death"].([]any) {
		entries = append(entries, map[string]any(e.(amqpTable)))
	}
	entries[0]["count"] = uint8(3)
	entries[1]["count"] = int16(2)
	entries[2]["count"] = uint64(1)
	named["x-death"] = entries
	a, b := ParseMeta("d", dlqMsg(plain)), ParseMeta("d", dlqMsg(named))
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("plain %+v\nnamed %+v", a, b)
	}
}

func TestParseMetaSourceIsTheDLQ(t *testing.T) {
	m := ParseMeta("orders.dlq", dlqMsg(map[string]any{"x-death": []any{
		map[string]any{"queue": "orders.dlq", "reason": "expired", "count": int64(1), "time": tDeath2}}}))
	if m.Source != "" || !strings.Contains(m.SourceNote, "orders.dlq itself") {
		t.Fatalf("Source %q, note %q", m.Source, m.SourceNote)
	}
}

// TestParseMetaBrokerDeathOverFramework: a message the broker dead-lettered
// itself keeps x-death's route and failure time when an application's
// exception headers ride along; the framework adds only the exception.
func TestParseMetaBrokerDeathOverFramework(t *testing.T) {
	death := func() []any {
		return []any{amqpTable{"queue": "orders", "reason": "rejected", "count": int64(1), "time": tDeath2,
			"exchange": "", "routing-keys": []any{"orders"}}}
	}
	tests := []struct {
		name string
		h    map[string]any
		want Meta
	}{
		{"spring message only", map[string]any{"x-death": death(), "x-first-death-queue": "orders",
			"x-first-death-reason": "rejected", "x-first-death-exchange": "",
			"x-exception-message": "order 17 not found"},
			Meta{Dialect: DialectRabbitMQ, Source: "orders", Exchange: "", RoutingKeys: []string{"orders"},
				Reason: ReasonRejected, Attempts: 1, FirstDeath: tDeath2, LastDeath: tDeath2,
				Exception: "order 17 not found", FailureGroup: "order <n> not found"}},
		{"spring full headers", map[string]any{"x-death": death(),
			"x-exception-message": "boom", "x-exception-type": "java.lang.IllegalStateException",
			"x-original-exchange": "elsewhere-x", "x-original-routingKey": "elsewhere"},
			Meta{Dialect: DialectRabbitMQ, Source: "orders", RoutingKeys: []string{"orders"},
				Reason: ReasonRejected, Attempts: 1, FirstDeath: tDeath2, LastDeath: tDeath2,
				ExceptionType: "java.lang.IllegalStateException", Exception: "boom",
				FailureGroup: "java.lang.IllegalStateException: boom"}},
		{"masstransit fault", map[string]any{"x-death": death(),
			"MT-Fault-Message": "bad", "MT-Fault-InputAddress": "queue:billing", "MT-Fault-RetryCount": "2"},
			Meta{Dialect: DialectRabbitMQ, Source: "orders", RoutingKeys: []string{"orders"},
				Reason: ReasonRejected, Attempts: 4, FirstDeath: tDeath2, LastDeath: tDeath2,
				Exception: "bad", FailureGroup: "bad"}},
		{"x-death without a source keeps spring's route", map[string]any{
			"x-death":             []any{amqpTable{"queue": "orders.dlq", "reason": "expired", "count": int64(1), "time": tDeath2}},
			"x-exception-message": "boom", "x-original-exchange": "", "x-original-routingKey": "orders"},
			Meta{Dialect: DialectSpring, Source: "orders", RoutingKeys: []string{"orders"}, Reason: ReasonException,
				FirstDeath: tDeath2, LastDeath: tDeath2, Exception: "boom", FailureGroup: "boom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := dlqMsg(tt.h)
			got := ParseMeta("orders.dlq", m)
			want := tt.want
			want.ID, want.Seq, want.MessageID, want.Size = got.ID, 4, "m-1", len(m.Body)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ParseMeta:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func wantEq[T comparable](t *testing.T, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}

func wantNonEmpty(t *testing.T, s string) {
	t.Helper()
	if s == "" {
		t.Error("want a non-empty string")
	}
}

// hasProblem reports whether an element of list starts with s.
func hasProblem(list []string, s string) bool {
	for _, x := range list {
		if strings.HasPrefix(x, s) {
			return true
		}
	}
	return false
}
