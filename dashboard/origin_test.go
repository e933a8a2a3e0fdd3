package dashboard

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// TestStartedFromIsTheApprovalsFrontEnd: a replay says where it was
// started from by the front end its approval came through, whatever its
// requester's identity looks like (a terminal client of the server is
// "api:<name>" and was once shown as the API); a record that names none
// falls back to the guess from the requester.
func TestStartedFromIsTheApprovalsFrontEnd(t *testing.T) {
	t.Parallel()
	terminal := engine.Replay{ID: "r_viaterminal0001", DLQ: "orders.dlq", State: engine.StateRunning, Total: 4,
		Requester: "api:alice", Approver: "api:bob", ApprovedVia: "terminal"}
	dash := engine.Replay{ID: "r_viadashboard001", DLQ: "orders.dlq", State: engine.StateRunning, Total: 4,
		Requester: "U0ALICE001", Approver: "api:carol", ApprovedVia: "dashboard"}
	old := engine.Replay{ID: "r_nofrontend00001", DLQ: "orders.dlq", State: engine.StateRunning, Total: 4,
		Requester: "api:agent", Approver: "U0BOB00001"}
	b := &listedBackend{fakeBackend: &fakeBackend{}, more: []engine.Replay{terminal, dash, old}}
	d, err := New(Config{Policy: testPolicy(t)}, Deps{Backend: b})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler()
	page := get(h, "http://dlqbot.test/dashboard/", signIn(t, h, tokOps))
	if page.Code != http.StatusOK {
		t.Fatalf("status %d", page.Code)
	}
	body := page.Body.String()
	for _, c := range []struct {
		r    engine.Replay
		want string
	}{{terminal, "terminal"}, {dash, "dashboard"}, {old, "API / agent"}} {
		_, rest, _ := strings.Cut(body, `data-replay="`+c.r.ID+`"`)
		row, _, _ := strings.Cut(rest, "</tr>")
		if !strings.Contains(row, "<td>"+c.r.Approver+"</td><td>"+c.want+"</td>") {
			t.Errorf("%s (approved via %q) shows as started from:\n%s\nwant %s", c.r.ID, c.r.ApprovedVia, row, c.want)
		}
	}

	d, err = New(Config{Policy: testPolicy(t)}, Deps{Backend: &recordBackend{fakeBackend: &fakeBackend{}, r: terminal}})
	if err != nil {
		t.Fatal(err)
	}
	h = d.Handler()
	page = get(h, "http://dlqbot.test/dashboard/replays/"+terminal.ID, signIn(t, h, tokOps))
	if body := page.Body.String(); !strings.Contains(body, "approved by api:bob · started from terminal at ") || strings.Contains(body, "API / agent") {
		t.Errorf("the replay's page:\n%s", body)
	}
}
