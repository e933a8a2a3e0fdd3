package dashboard

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

type fakeAlerts []engine.AlertRecord

func (f fakeAlerts) List(context.Context) ([]engine.AlertRecord, error) { return f, nil }

// TestIndexShowsOpenAlerts: the index lists the watch's open alerts of
// the DLQs the signed-in principal may read, and no card without any.
func TestIndexShowsOpenAlerts(t *testing.T) {
	t.Parallel()
	p, err := commands.ParsePolicy([]byte(`
principals:
  - name: viewer
    token_sha256: ` + commands.HashToken(tokViewer) + `
roles:
  - name: viewers
    principals: [viewer]
    grants: [{queues: ["orders.*"], actions: [read]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	opened := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	al := fakeAlerts{{ID: "a_1", DLQ: "orders.dlq", Arrived: 30, Baseline: 2, Opened: opened}, {ID: "a_2", DLQ: "payments.dlq", Arrived: 12, Opened: opened}}
	d, err := New(Config{Policy: p}, Deps{Backend: &fakeBackend{}, Alerts: al})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler()
	page := get(h, "http://dlqbot.test/dashboard/", signIn(t, h, tokViewer)).Body.String()
	if !strings.Contains(page, `data-alert="orders.dlq"`) || !strings.Contains(page, "2026-12-06 07:00 UTC") {
		t.Fatalf("the index does not show orders.dlq's alert:\n%s", page)
	}
	if strings.Contains(page, "payments.dlq") {
		t.Fatal("the index shows an alert of a DLQ the viewer may not read")
	}
	d, _ = New(Config{Policy: p}, Deps{Backend: &fakeBackend{}})
	h = d.Handler()
	if page := get(h, "http://dlqbot.test/dashboard/", signIn(t, h, tokViewer)).Body.String(); strings.Contains(page, "Open alerts") {
		t.Fatal("an alerts card without alerts")
	}
}

// auditFilterBackend is fakeBackend whose audit trail keeps the filter
// it was asked for.
type auditFilterBackend struct {
	fakeBackend
	asked audit.Filter
}

func (f *auditFilterBackend) Audit(_ context.Context, _ commands.Principal, af audit.Filter) ([]audit.Entry, error) {
	f.asked = af
	return nil, nil
}

// TestAuditFiltersOfferTheWatch: the audit page's filters offer the
// watch's operations (alert, alert_resolved, snooze) and its front end,
// and pass the chosen ones to the trail.
func TestAuditFiltersOfferTheWatch(t *testing.T) {
	t.Parallel()
	fb := &auditFilterBackend{}
	d, err := New(Config{Policy: testPolicy(t)}, Deps{Backend: fb})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler()
	c := signIn(t, h, tokViewer)
	page := get(h, "http://dlqbot.test/dashboard/audit?op=snooze&front_end=watch", c).Body.String()
	for _, want := range []string{"<option>alert</option>", "<option>alert_resolved</option>", "<option selected>snooze</option>", "<option selected>watch</option>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the audit page has no %s:\n%s", want, page)
		}
	}
	if fb.asked.Op != audit.OpSnooze || fb.asked.FrontEnd != "watch" {
		t.Errorf("the trail was asked for op %q, front end %q; want %q, %q", fb.asked.Op, fb.asked.FrontEnd, audit.OpSnooze, "watch")
	}
}
