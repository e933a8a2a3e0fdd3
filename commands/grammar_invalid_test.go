package commands

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestParseInvalid checks that each mistake is a Reply (never a Command)
// that names the offending word and, where given, says what to do.
func TestParseInvalid(t *testing.T) {
	tests := []struct {
		in       string
		mentions []string
	}{
		// Commands.
		{"previw orders.dlq", []string{"`previw`", "did you mean `preview`", "Try: /dlq help"}},
		{"approve abcd", []string{"`approve`", "`replay`"}},
		{"stop r-1234", []string{"`pause` or `cancel`"}},
		{"resume r-1234 resend=all", []string{"`resend=`", "`in-doubt`", "`all`"}},
		{"pause r-1234 resend=in-doubt", []string{"`resend=in-doubt`"}},
		{"frobnicate", []string{"`frobnicate`", "preview"}},
		{"reason=rejected", []string{"`reason=rejected`", "Try: /dlq preview orders.dlq reason=rejected"}},
		{"foo=bar", []string{"`foo=bar`"}},
		{"help preview replay", []string{"`replay`"}},
		{"help previw", []string{"`previw`", "`preview`"}},
		{"list all", []string{"`all`"}},
		{"preview --json orders.dlq", []string{"`--json`", "dlqbot"}},
		// Preview: the DLQ.
		{"preview", []string{"preview needs", "Try: /dlq preview orders.dlq"}},
		{"preview reason=rejected", []string{"preview needs"}},
		{"preview orders.dlq payments.dlq", []string{"`payments.dlq`", "`orders.dlq`"}},
		{`preview "orders dlq"`, []string{"orders dlq", "white space"}},
		{`preview "a=b"`, []string{"a=b", "`=`"}},
		{"preview " + strings.Repeat("q", 256), []string{"256 bytes", "255"}},
		{"preview q\u200b", []string{"invisible"}},
		{"preview q\x01x", []string{"control", "U+0001"}},
		// Preview: keys.
		{"preview orders.dlq resaon=rejected", []string{"`resaon=`", "did you mean `reason=`?", "Try: /dlq preview orders.dlq reason=rejected"}},
		{"preview q id=00000000000000aa", []string{"`id=`", "`ids=`", "ids=00000000000000aa"}},
		{"preview q target=scratch", []string{"`target=`", "`to=`"}},
		{"preview q colour=red", []string{"`colour=`", "reason=, source="}},
		{"preview q =x", []string{"`=x`"}},
		{"preview q step=5", []string{"`step=`", "replay parameter", "Try: /dlq replay <token> step=5"}},
		{"preview q reason=rejected reason=expired", []string{"`reason=rejected`", "`reason=expired`", "twice"}},
		{"preview q reason=", []string{"`reason=`", "needs a value"}},
		{`preview q exception=""`, []string{"`exception=`", "needs a value"}},
		// Preview: values.
		{"preview q ids=xyz", []string{"`xyz`", "16 hex"}},
		{"preview q ids=00000000000000aa,,00000000000000bb", []string{"empty entry"}},
		{"preview q ids=00000000000000aa,", []string{"empty entry"}},
		{"preview q ids=00000000000000a", []string{"`00000000000000a`"}},
		{"preview q reason=rejectd", []string{"`reason=rejectd`", "`reason=rejected`", "Try: /dlq preview q reason=rejected"}},
		{"preview q reason=bored", []string{"`reason=bored`", "delivery_limit"}},
		{"preview q source=a\tb", []string{"`b`", "`q`"}},
		{`preview q source="a b"`, []string{"source queue", "white space"}},
		{`preview q source='"x'`, []string{"starts with a quote"}},
		{"preview q since=yesterday", []string{"`since=yesterday`", "2h"}},
		{"preview q until=2h30", []string{"`until=2h30`"}},
		{"preview q since=1h since=2h", []string{"`since=1h`", "`since=2h`"}},
		{"preview q since=2h until=3h", []string{"`since=2h`", "`until=3h`", "after"}},
		{"preview q since=2030-01-01T00:00:00Z", []string{"`since=2030-01-01T00:00:00Z`", "future"}},
		{"preview q since=1900-01-01T00:00:00Z", []string{"`since=1900-01-01T00:00:00Z`", "out of range"}},
		{"preview q since=99999999999999d", []string{"`since=99999999999999d`"}},
		{"preview q since=3000000h", []string{"`since=3000000h`"}},
		{"preview q limit=0", []string{"`limit=0`", "at least 1"}},
		{"preview q limit=-5", []string{"`limit=-5`", "whole number"}},
		{"preview q limit=ten", []string{"`limit=ten`"}},
		{"preview q limit=1.5", []string{"`limit=1.5`"}},
		{"preview q limit=99999999999999999999", []string{"too large"}},
		{"preview q park_after=0", []string{"`park_after=0`"}},
		{"preview q include_parked=maybe", []string{"`include_parked=maybe`", "true or false"}},
		{"preview q vhost=\"a b\"", []string{"vhost", "white space"}},
		{"preview q to=q", []string{"`to=q`", "DLQ itself"}},
		{"preview orders.dlq exception=timeout while", []string{"`while`", "`exception=timeout`", `exception="timeout while"`}},
		{`preview q exception="timeout`, []string{`"timeout`, "never closed"}},
		{`preview q exception="a"b`, []string{"`b`", "closing quote"}},
		// Replay.
		{"replay", []string{"replay needs", "token"}},
		{"replay orders.dlq", []string{"`orders.dlq`", "queue name", "Try: /dlq preview orders.dlq"}},
		{"replay abc", []string{"`abc`", "4 to 80"}},
		{"replay " + strings.Repeat("a", 81), []string{"4 to 80"}},
		{"replay ab$cd", []string{"`ab$cd`"}},
		{"replay abcd efgh", []string{"`efgh`", "`abcd`"}},
		{"replay abcd reason=rejected", []string{"`reason=`", "preview filter"}},
		{"replay abcd stpe=5", []string{"`stpe=`", "`step=`", "Try: /dlq replay abcd step=5"}},
		{"replay abcd step=0", []string{"`step=0`"}},
		{"replay abcd step=x", []string{"`step=x`"}},
		{"replay abcd cap=-1", []string{"`cap=-1`"}},
		{"replay abcd step=20 cap=10", []string{"`cap=10`", "`step=20`", "step=20 cap=20"}},
		{"replay abcd step=1000", []string{"`step=1000`", "default cap of 500", "step=1000 cap=1000"}},
		{"replay abcd cap=5", []string{"`cap=5`", "default first step of 10", "step=5 cap=5"}},
		{"replay abcd rate=0", []string{"`rate=0`", "rate=max"}},
		{"replay abcd takeover=maybe", []string{"`takeover=`", "`maybe`"}},
		{"replay abcd rate=-3", []string{"`rate=-3`"}},
		{"replay abcd rate=fast", []string{"`rate=fast`", "rate=auto"}},
		{"replay abcd rate=20 max=200", []string{"`max=`", "rate=auto", "rate=auto max=200"}},
		{"replay abcd rate=max max=200", []string{"`max=`"}},
		{"replay abcd rate=auto max=0", []string{"`max=0`"}},
		{"replay abcd max=max", []string{"`max=max`"}},
		{"replay abcd rate=NaN", []string{"`rate=NaN`"}},
		{"replay abcd rate=Inf", []string{"`rate=Inf`"}},
		{"replay abcd rate=0x10", []string{"`rate=0x10`"}},
		{"replay abcd timeout=5", []string{"`timeout=5`", "30s"}},
		{"replay abcd timeout=1ms", []string{"`timeout=1ms`", "out of range"}},
		{"replay abcd timeout=1d", []string{"`timeout=1d`"}},
		{"replay abcd timeout=2m timeout=3m", []string{"`timeout=2m`", "`timeout=3m`"}},
		// Replay ids.
		{"pause", []string{"pause needs a replay id", "/dlq status"}},
		{"check", []string{"check needs"}},
		{"cancel r-1 ", []string{"`r-1`"}},
		{"resume r-1234 r-5678", []string{"`r-5678`"}},
		{"status orders.dlq", []string{"`orders.dlq`"}},
		{"pause r-1234 step=5", []string{"`step=5`"}},
		{"check r-1234 now=1", []string{"`now=1`"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r := Parse(tt.in, now)
			if r.Cmd != nil {
				t.Fatalf("Parse(%q) = %#v, want a reply", tt.in, r.Cmd)
			}
			if r.Reply == "" {
				t.Fatalf("Parse(%q): no command and no reply", tt.in)
			}
			for _, m := range tt.mentions {
				if !strings.Contains(r.Reply, m) {
					t.Errorf("Parse(%q) reply %q does not mention %q", tt.in, r.Reply, m)
				}
			}
			if first := r.Reply[0]; first >= 'a' && first <= 'z' && !strings.HasPrefix(r.Reply, strings.Fields(tt.in + " x")[0]) {
				t.Errorf("reply %q does not start a sentence", r.Reply)
			}
		})
	}
}

func TestParseInvalidUTF8(t *testing.T) {
	for _, in := range []string{"preview \xff", `preview q source="\xff"`, `preview q reason="\xff"`} {
		r := Parse(in, now)
		if r.Cmd != nil || r.Reply == "" || !utf8.ValidString(r.Reply) {
			t.Errorf("Parse(%q) = %#v, want a UTF-8 reply", in, r)
		}
	}
}
