package letter

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// The header shapes below are what rascal 21.0.1 (on amqplib 2.3.1) wrote
// on RabbitMQ 3.10, as amqp091-go decodes them (integers come back as int8
// from amqplib's encoding, x-death's count as int64).
var tRascal = time.Date(2026, 11, 30, 15, 54, 37, 0, time.UTC)

func rascalTable(q string, recovery amqpTable) amqpTable {
	return amqpTable{
		"error":                 amqpTable{"code": "E_DECLINED", "message": "payment 1000 declined: card expired"},
		"originalExchange":      "",
		"originalQueue":         q,
		"originalRoutingKey":    q,
		"originalVhost":         "/",
		"recovery":              amqpTable{q: recovery},
		"redeliveries":          int8(0),
		"restoreRoutingHeaders": true,
	}
}

func rascalDeath(q string) map[string]any {
	return map[string]any{
		"x-death": []any{amqpTable{"count": int64(1), "exchange": "", "queue": q, "reason": "rejected",
			"routing-keys": []any{q}, "time": tRascal}},
		"x-first-death-exchange": "",
		"x-first-death-queue":    q,
		"x-first-death-reason":   "rejected",
	}
}

// rascalForward: forward recovery publishes to the DLQ itself: no x-death,
// a CC header.
func rascalForward() map[string]any {
	return map[string]any{
		"CC":     []any{"payments.payments"},
		"rascal": rascalTable("payments", amqpTable{"forwarded": int8(1)}),
		"seq":    int8(0),
		"tenant": "acme",
	}
}

// rascalRepublished: republish with attempts 2, then nack.
func rascalRepublished() map[string]any {
	h := rascalDeath("payments")
	h["rascal"] = rascalTable("payments", amqpTable{"republished": int8(2)})
	h["tenant"] = "acme"
	return h
}

// rascalImmediateNack: republish with immediateNack, then rascal's nack.
func rascalImmediateNack() map[string]any {
	h := rascalDeath("payments")
	h["rascal"] = rascalTable("payments", amqpTable{"immediateNack": true,
		"xDeath": amqpTable{"count": int8(0), "time": amqpTable{"value": int8(0)}}})
	return h
}

func TestRascalDialect(t *testing.T) {
	const group = "E_DECLINED: payment <n> declined: card expired"
	tests := []struct {
		name     string
		h        map[string]any
		reason   Reason
		attempts int
		death    time.Time
		refusal  bool
	}{
		{"forward", rascalForward(), ReasonException, 1, time.Time{}, false},
		{"republish then nack", rascalRepublished(), ReasonRejected, 3, tRascal, false},
		{"immediateNack", rascalImmediateNack(), ReasonRejected, 1, tRascal, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ParseMeta("payments.dlq", dlqMsg(tt.h))
			wantEq(t, m.Dialect, DialectRascal)
			wantEq(t, m.Source, "payments")
			wantEq(t, m.SourceNote, "")
			wantEq(t, m.Reason, tt.reason)
			wantEq(t, m.Attempts, tt.attempts)
			wantEq(t, m.Exception, "payment 1000 declined: card expired")
			wantEq(t, m.ExceptionType, "E_DECLINED")
			wantEq(t, m.FailureGroup, group)
			wantEq(t, m.LastDeath, tt.death)
			wantEq(t, m.Refusal != "", tt.refusal)
			wantEq(t, m.Returned, false)
			if len(m.Problems) > 0 {
				t.Errorf("problems %q", m.Problems)
			}
			if tt.refusal && !strings.Contains(m.Refusal, "rascal.recovery.payments") {
				t.Errorf("refusal %q does not say what the replay removes", m.Refusal)
			}
		})
	}
}

// TestRascalReturn: a replayed copy carries no rascal.error; one that comes
// back with a fresh one and the replay's id is a return, with or without
// x-death (forward leaves none).
func TestRascalReturn(t *testing.T) {
	for name, h := range map[string]map[string]any{"forward": rascalForward(), "republish": rascalRepublished(), "immediateNack": rascalImmediateNack()} {
		t.Run(name, func(t *testing.T) {
			sent := ReplayHeaders(h, "r_1", "payments")
			waiting := ParseMeta("payments.dlq", dlqMsg(sent))
			if waiting.Returned {
				t.Error("a copy as sent looks returned")
			}
			back := rascalForward() // rascal forwards it again: fresh error, no x-death
			back[HeaderReplayID], back[HeaderReplayCount] = "r_1", int8(1)
			m := ParseMeta("payments.dlq", dlqMsg(back))
			if !m.Returned || m.ReplayID != "r_1" {
				t.Errorf("returned copy: %+v", m)
			}
		})
	}
}

func TestRascalReplayResetsState(t *testing.T) {
	h := rascalImmediateNack()
	h["rascal"].(amqpTable)["recovery"].(amqpTable)["other"] = amqpTable{"republished": int8(1)}
	h["CC"] = []any{"payments.payments"}
	h["BCC"] = []any{"audit"}
	before := deepCopyHeaders(h)
	got := ReplayHeaders(h, "r_1", "payments")
	if !reflect.DeepEqual(h, before) {
		t.Fatal("input modified")
	}
	for _, k := range []string{"CC", "BCC", "x-death", "x-first-death-queue"} {
		if _, ok := got[k]; ok {
			t.Errorf("copy keeps %s", k)
		}
	}
	r, ok := got["rascal"].(amqpTable)
	if !ok {
		t.Fatalf("rascal table is %T, want the original's type", got["rascal"])
	}
	want := amqpTable{
		"originalExchange": "", "originalQueue": "payments", "originalRoutingKey": "payments", "originalVhost": "/",
		"recovery":     amqpTable{"other": amqpTable{"republished": int8(1)}},
		"redeliveries": int8(0), "restoreRoutingHeaders": true,
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("rascal table:\n got %#v\nwant %#v", r, want)
	}
	wantEq(t, got[HeaderReplayedFrom], any("payments"))
	m := ParseMeta("payments.dlq", dlqMsg(got))
	if m.Refusal != "" || m.Returned || m.Attempts != 0 {
		t.Errorf("replayed copy still reads as refused, returned or tried: %+v", m)
	}
}

func TestRascalMalformed(t *testing.T) {
	for name, r := range map[string]any{
		"error not a table": amqpTable{"originalQueue": "q", "error": "boom"},
		"counts wrong":      amqpTable{"originalQueue": "q", "recovery": amqpTable{"q": amqpTable{"republished": "many", "forwarded": int64(-2)}}},
		"queue not string":  amqpTable{"originalQueue": int8(3), "error": amqpTable{"message": []byte("x"), "code": int16(7)}},
		"recovery is array": amqpTable{"originalQueue": "q", "recovery": []any{1}},
		"queue is the dlq":  amqpTable{"originalQueue": "q.dlq", "error": amqpTable{"message": "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			h := map[string]any{"rascal": r}
			m := ParseMeta("q.dlq", dlqMsg(h))
			wantEq(t, m.Dialect, DialectRascal)
			if m.Attempts < 0 || (m.Source == "" && m.SourceNote == "") {
				t.Errorf("meta %+v", m)
			}
			_ = ReplayHeaders(h, "r", m.Source) // must not panic
		})
	}
	m := ParseMeta("q.dlq", dlqMsg(map[string]any{"rascal": amqpTable{"originalQueue": int8(3), "error": amqpTable{"code": int16(7), "message": "x"}}}))
	wantEq(t, m.ExceptionType, "7")
	if !hasProblem(m.Problems, "rascal.originalQueue") {
		t.Errorf("problems %q", m.Problems)
	}
}

// TestFingerprintTimelessCopies: a Spring copy records no failure time, so
// its id covers the whole copy: a later failure of the same message that
// differs in anything (stack trace, timestamp property, any header) is a
// different message, while rescans of one copy (whose delivery counters
// change) keep its id.
func TestFingerprintTimelessCopies(t *testing.T) {
	spring := func() map[string]any {
		return map[string]any{"x-exception-message": "declined", "x-original-exchange": "", "x-original-routingKey": "orders",
			"x-exception-stacktrace": "com.acme.DeclinedException: declined\n\tat com.acme.Pay.run(Pay.java:42)\n\tat java.lang.Thread.run(Thread.java:1583)",
			"nested":                 amqpTable{"b": int8(1), "a": []any{"x", tRascal}}}
	}
	base := ParseMeta("orders.errors", dlqMsg(spring())).ID
	rescan := spring()
	rescan["x-delivery-count"] = int64(3)
	wantEq(t, ParseMeta("orders.errors", dlqMsg(rescan)).ID, base)

	later := dlqMsg(spring())
	later.Timestamp = later.Timestamp.Add(time.Second)
	otherTrace := spring()
	otherTrace["x-exception-stacktrace"] = "com.acme.DeclinedException: declined\n\tat com.acme.Pay.run(Pay.java:43)"
	otherNested := spring()
	otherNested["nested"] = amqpTable{"b": int16(1), "a": []any{"x", tRascal}}
	for name, m := range map[string]Message{"timestamp": later, "stack trace": dlqMsg(otherTrace), "nested header type": dlqMsg(otherNested)} {
		if ParseMeta("orders.errors", m).ID == base {
			t.Errorf("a copy differing in its %s shares the id", name)
		}
	}
	// Rascal's forward has no failure time either; republish then nack has
	// the broker's, so its id does not depend on the other headers.
	f1, f2 := rascalForward(), rascalForward()
	f2["tenant"] = "other"
	if ParseMeta("q.dlq", dlqMsg(f1)).ID == ParseMeta("q.dlq", dlqMsg(f2)).ID {
		t.Error("rascal forward copies differing in a header share the id")
	}
	r1, r2 := rascalRepublished(), rascalRepublished()
	r2["tenant"] = "other"
	wantEq(t, ParseMeta("q.dlq", dlqMsg(r1)).ID, ParseMeta("q.dlq", dlqMsg(r2)).ID)
}
