package letter

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestGroupNormaliseException(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"  boom  ", "boom"},
		{"Order 12345 not found", "Order <n> not found"},
		{"amount 1,234.50 exceeds limit 1000", "amount <n> exceeds limit <n>"},
		{"balance -12.5 below zero", "balance -<n> below zero"},
		{"order 8f14e45f-ceea-467f-a0e6-3f2b1c9d4e21 missing", "order <uuid> missing"},
		{"id {8F14E45F-CEEA-467F-A0E6-3F2B1C9D4E21}", "id {<uuid>}"},
		{"at 2024-01-02T15:04:05.123Z retry", "at <time> retry"},
		{"at 2024-01-02T15:04:05+02:00 retry", "at <time> retry"},
		{"at 2024-01-02 15:04:05 retry", "at <time> retry"},
		{"failed 2024-01-02 15:04:05:123456 Z", "failed <time>"},
		{"on 2024-01-02", "on <time>"},
		{"clock 15:04:05.999 drifted", "clock <time> drifted"},
		{"pointer 0x7ffe12ab deref", "pointer <hex> deref"},
		{"commit deadbeef1234 bad", "commit <hex> bad"},
		{"hash 0123456789abcdef0123456789abcdef", "hash <hex>"},
		{"user usr_9x8y7z6w banned", "user usr_<id> banned"},
		{"order ORD12345 failed", "order <id> failed"},
		{"token a1b2c3 expired", "token <id> expired"},
		{"timed out after 30s", "timed out after <n>s"},
		{"took 30000ms", "took <n>ms"},
		{"file 2048KB", "file <n>KB"},
		{"key 12abcd34", "key <hex>"},
		{"key 12abcz34", "key <id>"},
		{"protocol v2 unsupported", "protocol v<n> unsupported"},
		{"ORD-991 at 10.0.0.12:5672", "ORD-<n> at <n>:<n>"},
		{"line1\n\tline2\r\n  line3", "line<n> line<n> line<n>"},
		{"com.acme.Base64DecodeException: bad input 42", "com.acme.Base64DecodeException: bad input <n>"},
		{"System.Int32Overflow: value 9999999999", "System.Int32Overflow: value <n>"},
		{"ValueError: invalid literal for int() with base 10: 'x7'", "ValueError: invalid literal for int() with base <n>: 'x<n>'"},
		{"Order123: was not a type", "<id>: was not a type"},
		{"café au lait 3 fois", "café au lait <n> fois"},
		{"deadbeefcafe", "deadbeefcafe"}, // letters only: a word, not a number
	}
	for _, tt := range tests {
		if got := NormaliseException(tt.in); got != tt.want {
			t.Errorf("NormaliseException(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestGroupSameFailureGroupsTogether(t *testing.T) {
	same := [][2]string{
		{"com.acme.OrderException: Order 123 has amount 10.5", "com.acme.OrderException: Order 987654 has amount 7"},
		{"Payment 5d1c2e3f-0000-4000-8000-000000000001 declined at 2024-01-02T10:00:00Z",
			"Payment 00000000-1111-4222-8333-444444444444 declined at 2025-12-31T23:59:59.5+01:00"},
		{"customer cus_N8sdf7Ksd92 not found", "customer cus_Xk29dkQ0aa1 not found"},
		{"lock 0xDEAD held by pid 4411", "lock 0x1f held by pid 9"},
		{"timeout   after\t500 ms", "timeout after 1200 ms"},
		{"System.TimeoutException: request abc123def took 30000ms", "System.TimeoutException: request 99ffee0011 took 500ms"},
		{"disk full: 12GB used", "disk full: 7GB used"},
	}
	for _, p := range same {
		a, b := NormaliseException(p[0]), NormaliseException(p[1])
		if a != b {
			t.Errorf("want equal groups:\n %q → %q\n %q → %q", p[0], a, p[1], b)
		}
	}
	apart := [][2]string{
		{"com.acme.OrderException: Order 1 missing", "com.acme.PaymentException: Order 1 missing"},
		{"com.acme.Base64DecodeException: bad", "com.acme.Base32DecodeException: bad"},
		{"Order 1 missing", "Order 1 duplicated"},
		{"ValueError: bad", "KeyError: bad"},
		{"amount -5 invalid", "amount 5 invalid"},
	}
	for _, p := range apart {
		if a, b := NormaliseException(p[0]), NormaliseException(p[1]); a == b {
			t.Errorf("want different groups for %q and %q, both %q", p[0], p[1], a)
		}
	}
}

func TestGroupCapped(t *testing.T) {
	long := strings.Repeat("é word ", 2000) // 14,000 bytes
	got := NormaliseException(long)
	if n := utf8.RuneCountInString(got); n > 200 {
		t.Fatalf("%d characters", n)
	}
	if !utf8.ValidString(got) || got != strings.TrimSpace(got) {
		t.Fatalf("bad cut: %q", got)
	}
	if got := NormaliseException(strings.Repeat("1 ", 1000)); utf8.RuneCountInString(got) > 200 {
		t.Fatalf("%d characters", utf8.RuneCountInString(got))
	}
}

func TestGroupFailureGroupFallsBackToReason(t *testing.T) {
	wantEq(t, failureGroup("", "", ReasonExpired), "expired")
	wantEq(t, failureGroup("", "  ", ReasonExpired), "expired")
	wantEq(t, failureGroup("java.io.IOException", "", ReasonException), "java.io.IOException")
	wantEq(t, failureGroup("", "disk 3 full", ReasonException), "disk <n> full")
}
