package commands

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

var now = time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func sel(dlq string, f func(*engine.Selection)) PreviewCmd {
	s := engine.Selection{DLQ: dlq}
	if f != nil {
		f(&s)
	}
	return PreviewCmd{Selection: s}
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		in   string
		want Command
	}{
		{"", HelpCmd{}},
		{"   ", HelpCmd{}},
		{"help", HelpCmd{}},
		{"HELP Preview", HelpCmd{Topic: "preview"}},
		{"help reason=", HelpCmd{Topic: "reason"}},
		{"help reason=rejected", HelpCmd{Topic: "reason"}},
		{"help selection", HelpCmd{Topic: "filters"}},
		{"help park_after", HelpCmd{Topic: "park_after"}},
		{"list", ListCmd{}},
		{"preview orders.dlq", sel("orders.dlq", nil)},
		{"  preview\torders.dlq  ", sel("orders.dlq", nil)},
		{"preview reason=rejected orders.dlq", sel("orders.dlq", func(s *engine.Selection) { s.Reason = engine.ReasonRejected })},
		{"preview orders.dlq ids=3F2A9C1B7E4D5A60,0000000000000001,3f2a9c1b7e4d5a60", sel("orders.dlq", func(s *engine.Selection) {
			s.IDs = []string{"0000000000000001", "3f2a9c1b7e4d5a60"}
		})},
		{"preview q reason=Delivery-Limit", sel("q", func(s *engine.Selection) { s.Reason = engine.ReasonDeliveryLimit })},
		{"preview q reason=maxlen", sel("q", func(s *engine.Selection) { s.Reason = engine.ReasonMaxLen })},
		{"preview q reason=expired", sel("q", func(s *engine.Selection) { s.Reason = engine.ReasonExpired })},
		{"preview q reason=exception", sel("q", func(s *engine.Selection) { s.Reason = engine.ReasonException })},
		{"preview q reason=skipped", sel("q", func(s *engine.Selection) { s.Reason = engine.ReasonSkipped })},
		{"preview q reason=unknown", sel("q", func(s *engine.Selection) { s.Reason = engine.ReasonUnknown })},
		{"preview orders_error source=orders", sel("orders_error", func(s *engine.Selection) { s.Source = "orders" })},
		{"preview q source=amq.gen-JzTY20BRgKO-HjmUJj0wLg", sel("q", func(s *engine.Selection) { s.Source = "amq.gen-JzTY20BRgKO-HjmUJj0wLg" })},
		{"preview q since=2h", sel("q", func(s *engine.Selection) { s.Since = utc("2025-03-10T10:00:00Z") })},
		{"preview q since=-30m", sel("q", func(s *engine.Selection) { s.Since = utc("2025-03-10T11:30:00Z") })},
		{"preview q since=1d", sel("q", func(s *engine.Selection) { s.Since = utc("2025-03-09T12:00:00Z") })},
		{"preview q since=1w", sel("q", func(s *engine.Selection) { s.Since = utc("2025-03-03T12:00:00Z") })},
		{"preview q since=1d12h until=90m", sel("q", func(s *engine.Selection) {
			s.Since, s.Until = utc("2025-03-09T00:00:00Z"), utc("2025-03-10T10:30:00Z")
		})},
		{"preview q since=2025-03-01T08:00:00+02:00 until=2025-03-02", sel("q", func(s *engine.Selection) {
			s.Since, s.Until = utc("2025-03-01T06:00:00Z"), utc("2025-03-02T00:00:00Z")
		})},
		{"preview q since=2025-03-01T08:00:00.999Z", sel("q", func(s *engine.Selection) { s.Since = utc("2025-03-01T08:00:00Z") })},
		{"preview q until=2030-01-01T00:00:00Z", sel("q", func(s *engine.Selection) { s.Until = utc("2030-01-01T00:00:00Z") })},
		{`preview q exception="timeout while"`, sel("q", func(s *engine.Selection) { s.Exception = "timeout while" })},
		{`preview q exception=“timeout while”`, sel("q", func(s *engine.Selection) { s.Exception = "timeout while" })},
		{`preview q exception='say "hi"'`, sel("q", func(s *engine.Selection) { s.Exception = `say "hi"` })},
		{`preview q exception="say \"hi\" \\ now"`, sel("q", func(s *engine.Selection) { s.Exception = `say "hi" \ now` })},
		{`preview q exception="C:\temp\x"`, sel("q", func(s *engine.Selection) { s.Exception = `C:\temp\x` })},
		{`preview q exception=NullPointerException`, sel("q", func(s *engine.Selection) { s.Exception = "NullPointerException" })},
		{`preview q exception=a=b`, sel("q", func(s *engine.Selection) { s.Exception = "a=b" })},
		{"preview q limit=100", sel("q", func(s *engine.Selection) { s.Limit = 100 })},
		{"preview q limit=007", sel("q", func(s *engine.Selection) { s.Limit = 7 })},
		{"preview q park_after=5", sel("q", func(s *engine.Selection) { s.ParkAfter = 5 })},
		{"preview q include_parked=true", sel("q", func(s *engine.Selection) { s.IncludeParked = true })},
		{"preview q include_parked=False", sel("q", nil)},
		{"preview q vhost=prod", sel("q", func(s *engine.Selection) { s.Vhost = "prod" })},
		{"preview q vhost=/", sel("q", func(s *engine.Selection) { s.Vhost = "/" })},
		{"preview q to=orders.scratch", sel("q", func(s *engine.Selection) { s.To = "orders.scratch" })},
		{"preview q to=--x", sel("q", func(s *engine.Selection) { s.To = "--x" })},
		{"preview q to=a/b=c", sel("q", func(s *engine.Selection) { s.To = "a/b=c" })},
		{"preview événements.dlq", sel("événements.dlq", nil)},
		{`PREVIEW orders.dlq Reason=rejected SOURCE=orders since=2h exception="bad json" limit=10 park_after=4 include_parked=yes vhost=prod to=scratch ids=00000000000000aa`,
			sel("orders.dlq", func(s *engine.Selection) {
				s.Reason, s.Source, s.Since = engine.ReasonRejected, "orders", utc("2025-03-10T10:00:00Z")
				s.Exception, s.Limit, s.ParkAfter, s.IncludeParked = "bad json", 10, 4, true
				s.Vhost, s.To, s.IDs = "prod", "scratch", []string{"00000000000000aa"}
			})},
		{"replay tok_123-ABC", ReplayCmd{Token: "tok_123-ABC"}},
		{"replay abcd step=5 cap=200 rate=20 timeout=2m", ReplayCmd{Token: "abcd", Params: engine.Params{Step: 5, Cap: 200, Rate: 20, Timeout: 2 * time.Minute}}},
		{"replay abcd takeover=yes", ReplayCmd{Token: "abcd", Params: engine.Params{TakeOver: true}}},
		{"replay abcd takeover=no", ReplayCmd{Token: "abcd"}},
		{"replay abcd rate=0.5", ReplayCmd{Token: "abcd", Params: engine.Params{Rate: 0.5}}},
		{"replay abcd rate=MAX", ReplayCmd{Token: "abcd", Params: engine.Params{Rate: -1}}},
		{"replay abcd step=600 cap=600", ReplayCmd{Token: "abcd", Params: engine.Params{Step: 600, Cap: 600}}},
		{"replay abcd cap=10", ReplayCmd{Token: "abcd", Params: engine.Params{Cap: 10}}},
		{"replay abcd timeout=1m30s", ReplayCmd{Token: "abcd", Params: engine.Params{Timeout: 90 * time.Second}}},
		{"status", StatusCmd{}},
		{"status r-1234", StatusCmd{ReplayID: "r-1234"}},
		{"pause r-1234", PauseCmd{ReplayID: "r-1234"}},
		{"resume r-1234", ResumeCmd{ReplayID: "r-1234"}},
		{"resume r-1234 resend=in-doubt", ResumeCmd{ReplayID: "r-1234", Resend: "in-doubt"}},
		{"resume resend=in-doubt r-1234", ResumeCmd{ReplayID: "r-1234", Resend: "in-doubt"}},
		{"cancel r-1234", CancelCmd{ReplayID: "r-1234"}},
		{"check r-1234", CheckCmd{ReplayID: "r-1234"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r := Parse(tt.in, now)
			if r.Reply != "" || r.Cmd == nil {
				t.Fatalf("Parse(%q) = reply %q, want %#v", tt.in, r.Reply, tt.want)
			}
			if !reflect.DeepEqual(r.Cmd, tt.want) {
				t.Fatalf("Parse(%q)\n got %#v\nwant %#v", tt.in, r.Cmd, tt.want)
			}
			// The canonical form parses back to the same command.
			again := Parse(r.Cmd.String(), now)
			if !reflect.DeepEqual(again.Cmd, r.Cmd) {
				t.Fatalf("round trip of %q via %q: got %#v (reply %q)", tt.in, r.Cmd.String(), again.Cmd, again.Reply)
			}
		})
	}
}

func TestCanonicalString(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"preview orders.dlq to=scratch reason=REJECTED limit=5 ids=00000000000000bb,00000000000000aa",
			"preview orders.dlq ids=00000000000000aa,00000000000000bb reason=rejected limit=5 to=scratch"},
		{"preview q vhost=/ since=2h", "preview q vhost=/ since=2025-03-10T10:00:00Z"},
		{`preview q exception='tab	here'`, `preview q exception="tab\there"`},
		{"replay abcd timeout=120s rate=max cap=50", "replay abcd cap=50 rate=max timeout=2m0s"},
		{"replay abcd takeover=YES step=5", "replay abcd step=5 takeover=yes"},
		{"replay abcd rate=1e6", "replay abcd rate=1000000"},
		{"replay abcd max=200 rate=AUTO", "replay abcd rate=auto max=200"},
		{"replay abcd max=200", "replay abcd max=200"},
		{"Status", "status"},
		{"help FILTER", "help filters"},
	}
	for _, tt := range tests {
		r := Parse(tt.in, now)
		if r.Cmd == nil {
			t.Fatalf("Parse(%q): %s", tt.in, r.Reply)
		}
		if got := r.Cmd.String(); got != tt.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseRelativeTimesUseNow(t *testing.T) {
	// A now with nanoseconds, a monotonic reading and a zone: the result is
	// UTC, whole seconds, and equal to what the canonical form parses to.
	local := time.Now().In(time.FixedZone("CEST", 2*3600))
	r := Parse("preview q since=2h until=1h", local)
	p, ok := r.Cmd.(PreviewCmd)
	if !ok {
		t.Fatalf("got %q", r.Reply)
	}
	want := local.Add(-2 * time.Hour).UTC().Truncate(time.Second)
	if !p.Selection.Since.Equal(want) || p.Selection.Since.Location() != time.UTC || p.Selection.Since.Nanosecond() != 0 {
		t.Fatalf("since = %v, want %v in UTC", p.Selection.Since, want)
	}
	if again := Parse(p.String(), local); !reflect.DeepEqual(again.Cmd, r.Cmd) {
		t.Fatalf("round trip: %#v vs %#v", again.Cmd, r.Cmd)
	}
}

func TestNameMatchesCanonicalVerb(t *testing.T) {
	for _, in := range []string{"help", "list", "preview q", "replay abcd", "status", "pause abcd", "resume abcd", "cancel abcd", "check abcd"} {
		c := Parse(in, now).Cmd
		if c == nil || !strings.HasPrefix(c.String(), c.Name()) {
			t.Errorf("%q: Name %q does not start String %q", in, c.Name(), c.String())
		}
	}
}

func TestParseAsUsesPrefix(t *testing.T) {
	r := ParseAs("/dlq-prod", "previw q", now)
	if !strings.Contains(r.Reply, "/dlq-prod help") {
		t.Fatalf("reply %q does not use the prefix", r.Reply)
	}
}

func TestUnescapeSlack(t *testing.T) {
	tests := map[string]string{
		"preview <http://events.live|events.live> reason=rejected": "preview events.live reason=rejected",
		"preview q exception=&quot;a &lt;b&gt; &amp; c":            "preview q exception=&quot;a <b> & c",
		"preview <https://x.io>":                                   "preview x.io",
		"preview q exception=\"a <b\"":                             "preview q exception=\"a <b\"",
	}
	for in, want := range tests {
		if got := UnescapeSlack(in); got != want {
			t.Errorf("UnescapeSlack(%q) = %q, want %q", in, got, want)
		}
	}
}
