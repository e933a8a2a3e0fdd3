package dashboard

import (
	"context"
	"strings"
	"testing"
	"time"

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
