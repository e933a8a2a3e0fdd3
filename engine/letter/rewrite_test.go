package letter

import (
	"math"
	"reflect"
	"testing"
	"time"
)

func TestParseMetaReplay(t *testing.T) {
	tests := []struct {
		name     string
		h        map[string]any
		count    int
		returned bool
	}{
		{"never replayed", rabbitHeaders(), 0, false},
		{"replay id without death", map[string]any{"x-replay-id": "r1", "x-replay-count": int32(1)}, 1, false},
		{"replay id with delivery count only", map[string]any{"x-replay-id": "r1", "x-delivery-count": int64(3)}, 0, false},
		{"replay id with x-death", map[string]any{"x-replay-id": "r1", "x-replay-count": int64(2),
			"x-death": []any{map[string]any{"queue": "orders", "reason": "rejected", "count": int64(1), "time": tDeath3}}}, 2, true},
		{"spring copy came back", map[string]any{"x-replay-id": "r1", "x-replay-count": "3", "x-exception-message": "boom",
			"x-original-exchange": "", "x-original-routingKey": "orders"}, 3, true},
		{"masstransit copy came back", map[string]any{"x-replay-id": "r1", "x-replay-count": uint16(1), "MT-Fault-Message": "x"}, 1, true},
		{"nservicebus copy came back", map[string]any{"x-replay-id": "r1", "NServiceBus.FailedQ": "q",
			"NServiceBus.ExceptionInfo.Message": "x"}, 0, true},
		{"death without replay id", map[string]any{"x-replay-count": int8(1), "x-first-death-queue": "q"}, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ParseMeta("d", dlqMsg(tt.h))
			wantEq(t, m.ReplayCount, tt.count)
			wantEq(t, m.Returned, tt.returned)
			if id, _ := tt.h["x-replay-id"].(string); m.ReplayID != id {
				t.Errorf("ReplayID = %q, want %q", m.ReplayID, id)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	base := func() Message { return dlqMsg(rabbitHeaders()) }
	id := ParseMeta("d", base()).ID
	for i := 0; i < 20; i++ { // fresh maps, so a fresh iteration order each time
		if got := ParseMeta("d", base()).ID; got != id {
			t.Fatalf("scan %d: id %s, want %s", i, got, id)
		}
	}
	copy2 := base()
	copy2.Seq = 99
	copy2.Headers["x-death"].([]any)[0].(amqpTable)["count"] = int64(7) // died again since: same identity
	wantEq(t, ParseMeta("other.dlq", copy2).ID, id)

	differ := map[string]func(m *Message){
		"body":           func(m *Message) { m.Body = []byte(`{"order":43}`) },
		"message id":     func(m *Message) { m.MessageID = "m-2" },
		"death time":     func(m *Message) { m.Headers["x-death"].([]any)[2].(amqpTable)["time"] = tDeath1.Add(-time.Second) },
		"first queue":    func(m *Message) { m.Headers["x-first-death-queue"] = "orders2" },
		"replay id":      func(m *Message) { m.Headers["x-replay-id"] = "r1" },
		"replay count":   func(m *Message) { m.Headers["x-replay-count"] = int32(1) },
		"spring dialect": func(m *Message) { m.Headers = map[string]any{"x-exception-message": "x"} },
	}
	for name, change := range differ {
		m := base()
		change(&m)
		if got := ParseMeta("d", m).ID; got == id {
			t.Errorf("%s changed but the id did not", name)
		}
	}
	// Length prefixes keep part boundaries apart.
	if Fingerprint("a", []byte("bc")) == Fingerprint("ab", []byte("c")) ||
		Fingerprint("", nil, "ab", "c") == Fingerprint("", nil, "a", "bc") ||
		Fingerprint("", nil, "") == Fingerprint("", nil) {
		t.Error("fingerprint parts run together")
	}
	if !metaIDRE.MatchString(Fingerprint("", nil)) {
		t.Error("bad id format")
	}
	// A replayed copy never shares an id with its original, in any dialect.
	for _, h := range []map[string]any{{"MT-Fault-Message": "x"}, {"NServiceBus.FailedQ": "q"}, {}} {
		orig := dlqMsg(h)
		back := dlqMsg(ReplayHeaders(h, "r1", "q"))
		if ParseMeta("q_error", orig).ID == ParseMeta("q_error", back).ID {
			t.Errorf("%v: replayed copy shares the original's id", h)
		}
	}
}

func TestRewriteReplayHeaders(t *testing.T) {
	nested := amqpTable{"inner": []any{int8(1), amqpTable{"deep": "x"}}}
	arr := []any{"a", int64(2), nil}
	in := map[string]any{
		"x-death":                  []any{map[string]any{"queue": "orders"}},
		"x-first-death-queue":      "orders",
		"x-first-death-reason":     "rejected",
		"x-first-death-exchange":   "",
		"x-last-death-queue":       "orders",
		"x-last-death-reason":      "rejected",
		"x-last-death-exchange":    "",
		"x-delivery-count":         int64(4),
		"x-acquired-count":         int64(5),
		"x-replay-id":              "old",
		"x-replay-count":           int64(2),
		"stroma.dlq.replayed_from": "older",
		"X-Death":                  "kept: AMQP names are case-sensitive",
		"x-deathly":                "kept: not a death header",
		"x-exception-message":      "kept",
		"tenant":                   "acme",
		"raw":                      []byte{0, 1, 2},
		"nested":                   nested,
		"list":                     arr,
		"when":                     tDeath1,
		"price":                    amqpDecimal{Scale: 2, Value: 1999},
		"nothing":                  nil,
		"flag":                     true,
		"ratio":                    float32(0.5),
	}
	before := deepCopyHeaders(in)
	got := ReplayHeaders(in, "r-42", "orders")
	want := map[string]any{
		"x-replay-id":              "r-42",
		"x-replay-count":           int32(3),
		"stroma.dlq.replayed_from": "orders",
		"X-Death":                  "kept: AMQP names are case-sensitive",
		"x-deathly":                "kept: not a death header",
		"x-exception-message":      "kept",
		"tenant":                   "acme",
		"raw":                      []byte{0, 1, 2},
		"nested":                   nested,
		"list":                     arr,
		"when":                     tDeath1,
		"price":                    amqpDecimal{Scale: 2, Value: 1999},
		"nothing":                  nil,
		"flag":                     true,
		"ratio":                    float32(0.5),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReplayHeaders:\n got %#v\nwant %#v", got, want)
	}
	if _, ok := got["nested"].(amqpTable); !ok {
		t.Error("nested table lost its type")
	}
	if !reflect.DeepEqual(in, before) {
		t.Error("input modified")
	}
	got["tenant"] = "changed"
	if in["tenant"] != "acme" {
		t.Error("result shares the input map")
	}
}

func TestRewriteReplayCount(t *testing.T) {
	tests := []struct {
		name string
		prev any
		want int32
	}{
		{"absent", nil, 1},
		{"int8", int8(0), 1},
		{"uint8", uint8(1), 2},
		{"int16", int16(2), 3},
		{"uint16", uint16(3), 4},
		{"int32", int32(4), 5},
		{"uint32", uint32(5), 6},
		{"int64", int64(6), 7},
		{"uint64", uint64(7), 8},
		{"int", 8, 9},
		{"numeric string", "9", 10},
		{"padded string", " 10 ", 11},
		{"bytes", []byte("11"), 12},
		{"integral float", float64(12), 13},
		{"decimal", amqpDecimal{Scale: 1, Value: 130}, 14},
		{"unreadable string", "many", 1},
		{"fraction", 1.5, 1},
		{"table", amqpTable{}, 1},
		{"negative", int64(-7), 1},
		{"huge", int64(math.MaxInt64), math.MaxInt32},
		{"at int32 max", int32(math.MaxInt32), math.MaxInt32},
		{"huge unsigned", uint64(math.MaxUint64), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]any{}
			if tt.name != "absent" {
				h["x-replay-count"] = tt.prev
			}
			got, ok := ReplayHeaders(h, "r", "q")["x-replay-count"].(int32)
			if !ok || got != tt.want {
				t.Errorf("x-replay-count = %v (int32 %v), want %d", got, ok, tt.want)
			}
		})
	}
}

func TestRewriteNilAndDeathHeaders(t *testing.T) {
	got := ReplayHeaders(nil, "r", "q")
	want := map[string]any{"x-replay-id": "r", "x-replay-count": int32(1), "stroma.dlq.replayed_from": "q"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v", got)
	}
	list := DeathHeaders()
	wantList := []string{"x-death", "x-delivery-count", "x-acquired-count", "x-first-death-*", "x-last-death-*"}
	if !reflect.DeepEqual(list, wantList) {
		t.Errorf("DeathHeaders() = %q", list)
	}
	list[0] = "changed"
	if DeathHeaders()[0] != "x-death" {
		t.Error("DeathHeaders returns shared state")
	}
	for name, want := range map[string]bool{
		"x-death": true, "x-first-death-queue": true, "x-last-death-whatever": true,
		"x-delivery-count": true, "x-acquired-count": true,
		"x-death-2": false, "X-Death": false, "x-replay-count": false, "x-first-death": false,
	} {
		if IsDeathHeader(name) != want {
			t.Errorf("IsDeathHeader(%q) = %v", name, !want)
		}
	}
}

// deepCopyHeaders copies maps and slices of a header value recursively
// (other values are immutable or compared by value).
func deepCopyHeaders(h map[string]any) map[string]any {
	out := make(map[string]any, len(h))
	for k, v := range h {
		out[k] = deepCopyValue(v)
	}
	return out
}

func deepCopyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return deepCopyHeaders(t)
	case amqpTable:
		return amqpTable(deepCopyHeaders(t))
	case []any:
		out := make([]any, len(t))
		for i := range t {
			out[i] = deepCopyValue(t[i])
		}
		return out
	case []byte:
		return append([]byte(nil), t...)
	case time.Time:
		return t
	}
	return v
}

// TestRewriteRoutingHeadersAndSource: CC and BCC (sender-selected
// distribution) never reach the copy, and stroma.dlq.replayed_from is the
// source queue, not the DLQ; an unknown source keeps an earlier replay's.
func TestRewriteRoutingHeadersAndSource(t *testing.T) {
	h := map[string]any{"CC": []any{"audit"}, "BCC": []any{"spy"}, "cc": "kept: names are case-sensitive",
		HeaderReplayedFrom: "orders"}
	got := ReplayHeaders(h, "r", "payments")
	for _, k := range []string{"CC", "BCC"} {
		if _, ok := got[k]; ok {
			t.Errorf("copy keeps %s", k)
		}
	}
	wantEq(t, got["cc"], any("kept: names are case-sensitive"))
	wantEq(t, got[HeaderReplayedFrom], any("payments"))
	wantEq(t, ReplayHeaders(h, "r", "")[HeaderReplayedFrom], any("orders"))
	if _, ok := ReplayHeaders(map[string]any{}, "r", "")[HeaderReplayedFrom]; ok {
		t.Error("an unknown source wrote stroma.dlq.replayed_from")
	}
	for name, want := range map[string]bool{"CC": true, "BCC": true, "x-death": true, "Cc": false, "x-replay-id": false} {
		wantEq(t, IsRemovedHeader(name), want)
	}
}
