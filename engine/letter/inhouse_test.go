package letter

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseHeaderDialect(t *testing.T) {
	d, err := ParseHeaderDialect(" source=x-app-source, exception=x-app-error ,attempts=x-app-attempts,time=x-app-failed-at ")
	if err != nil {
		t.Fatal(err)
	}
	want := HeaderDialect{Source: "x-app-source", Exception: "x-app-error", Attempts: "x-app-attempts", Time: "x-app-failed-at"}
	wantEq(t, d, want)
	wantEq(t, d.String(), "source=x-app-source,exception=x-app-error,attempts=x-app-attempts,time=x-app-failed-at")
	if d, err := ParseHeaderDialect(""); err != nil || d.Enabled() {
		t.Errorf("empty: %+v %v", d, err)
	}
	for in, says := range map[string]string{
		"exception=x-app-error":                       "source=<header> is required",
		"source=x-app-source,source=x-other":          "given twice",
		"source=x-app-source,stack=x-app-stack":       `unknown key "stack"`,
		"source":                                      "is not key=header",
		"source=":                                     "is not key=header",
		"source=x-app-source,,exception=e":            "empty entry",
		"source=x-a,exception=x-a":                    "name the same header",
		"source=x-death":                              "RabbitMQ or dlqbot itself writes",
		"source=x-a,attempts=x-replay-count":          "RabbitMQ or dlqbot itself writes",
		"source=" + strings.Repeat("h", maxNameLen+1): "longer than",
	} {
		_, err := ParseHeaderDialect(in)
		if !errors.Is(err, ErrBadDialect) || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v, want %q", in, err, says)
		}
	}
}

var appDialect = HeaderDialect{Source: "x-app-source", Exception: "x-app-error", Attempts: "x-app-attempts", Time: "x-app-failed-at"}

func TestInHouseDialect(t *testing.T) {
	failedAt := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	// The framework republished the failure to the DLQ itself.
	own := map[string]any{"x-app-source": "billing", "x-app-error": "invoice 881 locked by batch 20261130",
		"x-app-attempts": int8(3), "x-app-failed-at": "2026-11-30T12:00:00Z", "tenant": "acme"}
	m := ParseMetaDialect("billing.dlq", dlqMsg(own), appDialect)
	wantEq(t, m.Dialect, DialectInHouse)
	wantEq(t, m.Source, "billing")
	wantEq(t, m.Reason, ReasonException)
	wantEq(t, m.Attempts, 3)
	wantEq(t, m.LastDeath, failedAt)
	wantEq(t, m.FailureGroup, "invoice <n> locked by batch <n>")
	if len(m.Problems) > 0 {
		t.Errorf("problems %q", m.Problems)
	}
	// Without the setting the same message has no derivable origin.
	if u := ParseMeta("billing.dlq", dlqMsg(own)); u.Dialect != DialectUnknown || u.Source != "" {
		t.Errorf("without the dialect: %+v", u)
	}

	// The framework nacked after its own retries: the broker's x-death
	// count is added and its reason kept.
	nacked := rabbitHeaders()
	nacked["x-app-source"], nacked["x-app-error"], nacked["x-app-attempts"] = "orders", "boom", "2"
	m = ParseMetaDialect("orders.dlq", dlqMsg(nacked), appDialect)
	wantEq(t, m.Dialect, DialectInHouse)
	wantEq(t, m.Source, "orders")
	wantEq(t, m.Reason, ReasonRejected)
	wantEq(t, m.Attempts, 2+4) // x-death: 3 rejected + 1 expired from orders
	wantEq(t, m.FailureGroup, "boom")

	// A replayed copy starts fresh for the framework: its exception,
	// attempts and time headers are gone (the source stays), so it is no
	// return while it waits; back in the DLQ with a fresh exception header
	// and the replay's id it is one.
	sent := ReplayHeaders(own, "r_1", "billing", appDialect.ResetHeaders()...)
	for _, k := range []string{"x-app-error", "x-app-attempts", "x-app-failed-at"} {
		if _, ok := sent[k]; ok {
			t.Errorf("the copy keeps %s", k)
		}
	}
	wantEq(t, sent["x-app-source"], any("billing"))
	wantEq(t, sent["tenant"], any("acme"))
	if m := ParseMetaDialect("billing.dlq", dlqMsg(sent), appDialect); m.Returned || m.Attempts != 0 {
		t.Errorf("copy as sent: %+v", m)
	}
	sent["x-app-error"], sent["x-app-attempts"] = "invoice 881 locked", int8(3)
	if m := ParseMetaDialect("billing.dlq", dlqMsg(sent), appDialect); !m.Returned || m.ReplayID != "r_1" {
		t.Errorf("returned copy: %+v", m)
	}
	// Bad values are reported, never fatal.
	m = ParseMetaDialect("b.dlq", dlqMsg(map[string]any{"x-app-source": int8(1), "x-app-attempts": "many", "x-app-failed-at": true}), appDialect)
	if m.Source != "" || m.SourceNote == "" || len(m.Problems) != 3 {
		t.Errorf("malformed: %+v", m)
	}
	m = ParseMetaDialect("b.dlq", dlqMsg(map[string]any{"x-app-source": "b.dlq"}), appDialect)
	if m.Source != "" || !strings.Contains(m.SourceNote, "itself") {
		t.Errorf("source is the dlq: %+v", m)
	}
}

// TestNServiceBusAttempts: NServiceBus records its delayed retries
// (NServiceBus.Retries, a string header) and, in older versions, immediate
// ones (NServiceBus.FLRetries); attempts count them, and are unknown (0)
// when neither is there.
func TestNServiceBusAttempts(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{"NServiceBus.FailedQ": "Sales@MACHINE-01", "NServiceBus.ExceptionInfo.Message": "boom"}
	}
	for want, extra := range map[int]map[string]any{
		0: {},
		3: {"NServiceBus.Retries": "2"},
		6: {"NServiceBus.Retries": "2", "NServiceBus.FLRetries": "3"},
	} {
		h := base()
		for k, v := range extra {
			h[k] = v
		}
		m := ParseMeta("error", dlqMsg(h))
		if m.Attempts != want || m.Source != "Sales" || len(m.Problems) > 0 {
			t.Errorf("%v: attempts %d, source %q, problems %q", extra, m.Attempts, m.Source, m.Problems)
		}
	}
}
