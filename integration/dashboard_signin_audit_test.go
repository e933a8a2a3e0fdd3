package integration_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/dashboard"
	"github.com/stroma/dlqbot/dashboard/dashapi"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestDashboardSessionsAreAudited: a sign-in with an unknown token, a
// sign-in with the agent's token and its sign-out are each one entry in
// the store's audit trail, front end dashboard: refused (unauthorized,
// anonymous), done (the agent), done (the agent).
func TestDashboardSessionsAreAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{policy: apiPolicy(false), storeAudit: true})
	svc, err := api.New(api.Config{}, api.Deps{Ops: e.ops, Log: logger()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := amqp.New(amqp.Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	d, err := dashboard.New(dashboard.Config{Policy: e.ops.Policy()},
		dashboard.Deps{Backend: dashapi.New(e.ops, svc, b, e.store.Tokens()), Sessions: e.ops, Log: logger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(srv.Close)

	resp, err := http.PostForm(srv.URL+"/dashboard/signin", url.Values{"token": {"not-a-known-token"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("sign-in with an unknown token: %d, want 401", resp.StatusCode)
	}
	agent := newDashClient(t, srv.URL, tokAgent)
	csrf := csrfOf(t, agent.get("/dashboard/audit", http.StatusOK))
	if code := agent.post("/dashboard/signout", csrf); code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d, want 303", code)
	}

	type row struct{ principal, op, outcome, code string }
	want := []row{
		{"anonymous", audit.OpSignIn, audit.OutcomeRefused, "unauthorized"},
		{"agent", audit.OpSignIn, audit.OutcomeOK, ""},
		{"agent", audit.OpSignOut, audit.OutcomeOK, ""},
	}
	var got []row
	testkit.Eventually(t, 10*time.Second, "three dashboard entries in the trail", func() bool {
		es, err := e.store.Audit().List(context.Background(), audit.Filter{FrontEnd: "dashboard"})
		if err != nil {
			return false
		}
		got = got[:0]
		for _, x := range es {
			if x.Op == audit.OpSignIn || x.Op == audit.OpSignOut {
				got = append(got, row{x.Principal, x.Op, x.Outcome, x.Code})
			}
		}
		return len(got) >= len(want)
	})
	if len(got) != len(want) {
		t.Fatalf("entries %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
