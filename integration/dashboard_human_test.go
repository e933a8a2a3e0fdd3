package integration_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/dashboard"
	"github.com/stroma/dlqbot/dashboard/dashapi"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
)

// TestDashboardRequireHuman: with DLQBOT_MCP_REQUIRE_HUMAN an agent's API
// token signed in to the dashboard presses Resume on a paused replay and
// Cancel: both are refused (403, needs a human), the replay stays paused
// and nobody asked for it to run; a person's token (as_user) on the
// dashboard resumes it. (Before, the agent's Resume sent the rest.) The
// replay's page shows its preview's targets, read through dashapi from
// the token.
func TestDashboardRequireHuman(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{policy: apiPolicy(false), requireHuman: true, apiChannel: channel, events: true})
	svc, err := api.New(api.Config{EventPoll: 50 * time.Millisecond}, api.Deps{Ops: e.ops, Events: e.store.Events(), Log: logger()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := amqp.New(amqp.Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	d, err := dashboard.New(dashboard.Config{Policy: e.ops.Policy()}, dashboard.Deps{Backend: dashapi.New(e.ops, svc, b, e.store.Tokens()), Log: logger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(srv.Close)

	ctx := context.Background()
	src, dlq := dlqWith(e, 20)
	e.rabbit.Consume(src, func(amqp091.Delivery) string { return "ack" })
	alice, bob := ops.SlackCaller("U0ALICE001"), ops.SlackCaller("U0BOB00001")
	p, err := e.ops.Preview(ctx, alice, engine.Selection{DLQ: dlq})
	if err != nil {
		t.Fatal(err)
	}
	id := approvePaused(t, e, bob, p.Token)
	var r engine.Replay
	testkit.Eventually(t, 30*time.Second, "the replay paused", func() bool {
		r, err = e.store.Replays().Get(ctx, id)
		return err == nil && r.State == engine.StatePaused
	})

	agent := newDashClient(t, srv.URL, tokAgent)
	page := agent.get("/dashboard/replays/"+id, http.StatusOK)
	if !strings.Contains(page, `<section class="card" id="preview">`) || !strings.Contains(page, `<tr data-target="`+src+`">`) {
		t.Errorf("the replay's page does not show what its preview found (target %s):\n%s", src, page)
	}
	csrf := csrfOf(t, page)
	for _, verb := range []string{"resume", "cancel"} {
		if code := agent.post("/dashboard/replays/"+id+"/"+verb, csrf); code != http.StatusForbidden {
			t.Errorf("the agent's %s on the dashboard: status %d, want 403", verb, code)
		}
	}
	want, by, err := e.store.Replays().Desired(ctx, id)
	if err != nil || want != engine.StatePaused {
		t.Fatalf("after the agent's presses the replay is asked to be %q by %q (%v), want still paused", want, by, err)
	}
	if r, _ = e.store.Replays().Get(ctx, id); r.State != engine.StatePaused {
		t.Fatalf("the replay is %s", r.State)
	}
	if n := len(e.trail.Find(ops.FrontDashboard, "", "refused")); n != 2 {
		t.Errorf("%d dashboard refusals in the trail, want 2", n)
	}

	person := newDashClient(t, srv.URL, tokAlice)
	csrf = csrfOf(t, person.get("/dashboard/replays/"+id, http.StatusOK))
	if code := person.post("/dashboard/replays/"+id+"/resume", csrf); code != http.StatusSeeOther {
		t.Fatalf("the person's resume on the dashboard: status %d", code)
	}
	if want, _, err := e.store.Replays().Desired(ctx, id); err != nil || want != engine.StateRunning {
		t.Fatalf("after the person's resume: asked to be %q (%v)", want, err)
	}
	if _, err := e.ops.Control(ctx, bob, engine.ControlCancel, id); err != nil {
		t.Fatal(err)
	}
}

// approvePaused approves token as approver for a replay of one message a
// second in steps of one, and pauses it at once: a replay that has barely
// begun, for tests of what may change it. It returns the replay's id; the
// caller waits for the pause as it needs.
func approvePaused(t *testing.T, e *env, approver ops.Caller, token string) string {
	t.Helper()
	ctx := context.Background()
	out, err := e.ops.Approve(ctx, approver, ops.Approval{Token: token, Params: engine.Params{Step: 1, Cap: 1, Rate: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.Control(ctx, approver, engine.ControlPause, out.Replay.ID); err != nil {
		t.Fatal(err)
	}
	return out.Replay.ID
}
