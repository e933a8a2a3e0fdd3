package letter

import (
	"strings"
	"testing"
)

// TestFailureType: a channel sees a failure's class name or error code,
// derived per dialect, else its dead-letter reason — never its message.
func TestFailureType(t *testing.T) {
	const kyc = "KYC failed for customer John Roe, email john.roe@example.com, diagnosis C41"
	for _, c := range []struct {
		name string
		h    map[string]any
		dlq  string
		want string
	}{
		{"spring stack's first token", map[string]any{"x-exception-message": kyc, "x-original-exchange": "", "x-original-routingKey": "orders",
			"x-exception-stacktrace": "java.lang.IllegalStateException: " + kyc + "\n\tat x"}, "orders.dlq", "java.lang.IllegalStateException"},
		{"masstransit", map[string]any{"MT-Reason": "fault", "MT-Fault-Message": kyc, "MT-Fault-ExceptionType": "Acme.KycException",
			"MT-Fault-InputAddress": "rabbitmq://h/v/kyc"}, "kyc_error", "Acme.KycException"},
		{"nservicebus", map[string]any{"NServiceBus.FailedQ": "Sales@M1", "NServiceBus.ExceptionInfo.ExceptionType": "CurrencyNotSupported",
			"NServiceBus.ExceptionInfo.Message": kyc}, "error", "CurrencyNotSupported"},
		{"rascal error code", map[string]any{"rascal": map[string]any{"originalQueue": "kyc", "error": map[string]any{"message": kyc, "code": "E_KYC"}}},
			"kyc.dlq", "E_KYC"},
		{"a type that is a sentence", map[string]any{"NServiceBus.FailedQ": "Sales", "NServiceBus.ExceptionInfo.ExceptionType": "John Roe <john.roe@example.com>",
			"NServiceBus.ExceptionInfo.Message": kyc}, "error", "exception"},
		{"broker only", map[string]any{"x-death": []any{map[string]any{"queue": "kyc", "reason": "rejected", "count": int64(1)}}}, "kyc.dlq", "rejected"},
	} {
		meta := ParseMeta(c.dlq, Message{MessageID: "m", Headers: c.h})
		got := FailureType(meta.ExceptionType, meta.Exception, meta.Reason)
		if got != c.want {
			t.Errorf("%s: type %q, want %q (meta %+v)", c.name, got, c.want, meta)
		}
		if strings.Contains(got, "Roe") {
			t.Errorf("%s: the type shows the exception's message: %q", c.name, got)
		}
	}
	if got := FailureType("", "com.acme.KycException: "+kyc, ReasonRejected); got != "com.acme.KycException" {
		t.Errorf("type from the text: %q", got)
	}
	if got := FailureType("", "KycError: "+kyc, ReasonRejected); got != "KycError" {
		t.Errorf("type from the text: %q", got)
	}
	if got := FailureType("", "John: "+kyc, ReasonRejected); got != "rejected" {
		t.Errorf("a leading word that is no type: %q", got)
	}
}

// TestHeaderTargetValidated: a queue named in the headers passes the same
// check as a typed one; an invisible character makes it no valid target.
func TestHeaderTargetValidated(t *testing.T) {
	for _, bad := range []string{"orders\u200b", "ord\u00aders", "orders\u202e", "or ders", "orders\x00"} {
		meta := ParseMeta("error", Message{MessageID: "m", Headers: map[string]any{"NServiceBus.FailedQ": bad + "@M1",
			"NServiceBus.ExceptionInfo.ExceptionType": "System.Exception"}})
		if meta.Source != "" || meta.BadTarget != bad || !strings.Contains(meta.SourceNote, "no valid target") {
			t.Errorf("%q: source %q, bad target %q, note %q", bad, meta.Source, meta.BadTarget, meta.SourceNote)
		}
	}
	meta := ParseMeta("error", Message{MessageID: "m", Headers: map[string]any{"NServiceBus.FailedQ": "orders@M1"}})
	if meta.Source != "orders" || meta.BadTarget != "" {
		t.Errorf("a valid name: source %q, bad target %q", meta.Source, meta.BadTarget)
	}
	for name, want := range map[string]string{"orders": "", "\u043erders": "Latin and Cyrillic", "zahlung.bestätigt": "", "αβγ.δ": "", "kyc-\u03bfrders": "Latin and Greek"} {
		if got := MixedScripts(name); !strings.Contains(got, strings.Split(want, " and ")[0]) || (want == "") != (got == "") {
			t.Errorf("MixedScripts(%q) = %q, want %q", name, got, want)
		}
	}
}
