package ops_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
	"github.com/stroma/dlqbot/store"
)

// parkCounting is the fake engine, also counting parks.
type parkCounting struct {
	*fakeEngine
	pmu    sync.Mutex
	parked []string
}

func (p *parkCounting) Park(_ context.Context, id, by string) (engine.ParkResult, error) {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	p.parked = append(p.parked, id+" by "+by)
	return engine.ParkResult{}, nil
}

func (p *parkCounting) changes() int {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.parked) + len(p.fakeEngine.approved) + len(p.fakeEngine.controls)
}

func newHumanOps(t *testing.T, cfg ops.Config) (*ops.Ops, *parkCounting, *testkit.Trail) {
	t.Helper()
	p, err := commands.ParsePolicy([]byte(humanPolicy))
	if err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, tr := &parkCounting{fakeEngine: &fakeEngine{}}, &testkit.Trail{}
	cfg.Policy = p
	o, err := ops.New(cfg, ops.Deps{Engine: f, Tokens: f, Replays: f, Windows: st.Windows(), Audit: tr})
	if err != nil {
		t.Fatal(err)
	}
	return o, f, tr
}

// humanPolicy: agent (a token), agentos (an OS account) and the Slack
// member U0AGENT001 (agent-slack's as_user) need a human; bot is an
// automation token, alice a person's token, ops a person the dashboard's
// proxy signs in, batch an OS account with no Slack user. Everyone may
// replay everything.
var humanPolicy = `principals:
  - name: agent
    token_sha256: ` + commands.HashToken("agent-token") + `
    needs_human: true
  - name: agent-slack
    token_sha256: ` + commands.HashToken("agent-slack-token") + `
    as_user: U0AGENT001
    needs_human: true
  - name: agentos
    os_users: [agentos]
    needs_human: true
  - name: bot
    token_sha256: ` + commands.HashToken("bot-token") + `
  - name: alice
    token_sha256: ` + commands.HashToken("alice-token") + `
    as_user: U0ALICE001
  - name: ops
    emails: [ops@example.com]
  - name: batch
    os_users: [batch]
roles:
  - name: all
    users: [U0AGENT001, U0ALICE001, U0OTHER001]
    principals: [agent, agentos, bot, ops, batch]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
`

func principal(t *testing.T, o *ops.Ops, name string) commands.Principal {
	t.Helper()
	for _, p := range o.Policy().Principals {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no principal %s", name)
	return commands.Principal{}
}

// stateChanges are the state changes that need a caller who does not need
// a human, each on a replay (or preview) of someone else's.
var stateChanges = []struct {
	name string
	do   func(context.Context, *ops.Ops, ops.Caller) error
}{
	{"approve", func(ctx context.Context, o *ops.Ops, c ops.Caller) error {
		return err2(o.Approve(ctx, c, ops.Approval{Token: "p_U0OTHER001"}))
	}},
	{"resume", func(ctx context.Context, o *ops.Ops, c ops.Caller) error {
		return err2(o.Control(ctx, c, engine.ControlResume, "r_1"))
	}},
	{"park", func(ctx context.Context, o *ops.Ops, c ops.Caller) error { return err2(o.Park(ctx, c, "r_1")) }},
	{"cancel", func(ctx context.Context, o *ops.Ops, c ops.Caller) error {
		return err2(o.Control(ctx, c, engine.ControlCancel, "r_1"))
	}},
}

// TestNeedsHumanEveryFrontEnd is the refusal table: a caller that needs a
// human, through Slack, the HTTP API, MCP, the dashboard (signed in with
// its token) and the terminal (on the operator's credentials, or as a
// client of the server), is refused approve, resume, park and cancel
// with needs_human, the engine is asked nothing, and each refusal is in
// the trail. Pausing stays open to it. (Before, the dashboard and the
// terminal let it resume, and nobody checked park or cancel.)
func TestNeedsHumanEveryFrontEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, f, tr := newHumanOps(t, ops.Config{})
	agent := principal(t, o, "agent")
	callers := []struct {
		front string
		c     ops.Caller
	}{
		{"slack", ops.SlackCaller("U0AGENT001")},
		{"api", ops.PrincipalCaller(agent, ops.FrontAPI)},
		{"mcp", ops.PrincipalCaller(agent, ops.FrontMCP)},
		{"dashboard", ops.PrincipalCaller(agent, ops.FrontDashboard)},
		{"dashboard via proxy", ops.ProxyCaller(principal(t, o, "agent-slack"))},
		{"terminal", ops.TerminalCaller(o.Policy(), "agentos")},
		{"terminal client", ops.PrincipalCaller(agent, ops.FrontTerminal)},
	}
	for _, fe := range callers {
		for _, a := range stateChanges {
			err := a.do(ctx, o, fe.c)
			if got := code(err); got != ops.NeedsHuman {
				t.Errorf("%s %s: %s, want %s", fe.front, a.name, got, ops.NeedsHuman)
			}
		}
		if !o.NeedsHuman(fe.c) {
			t.Errorf("%s: NeedsHuman says no", fe.front)
		}
	}
	if n := f.changes(); n != 0 {
		t.Fatalf("the engine was asked to change %d thing(s): %v %v %v", n, f.approved, f.controls, f.parked)
	}
	if n, want := len(tr.Find("", "", audit.OutcomeRefused)), len(callers)*len(stateChanges); n != want {
		t.Errorf("%d refusals recorded, want %d", n, want)
	}
	for _, fe := range callers {
		if err := err2(o.Control(ctx, fe.c, engine.ControlPause, "r_1")); err != nil {
			t.Errorf("%s pause: %v, want the brake open", fe.front, err)
		}
	}
}

// TestRequireHumanEveryFrontEnd: with DLQBOT_MCP_REQUIRE_HUMAN, every
// caller with a bearer token needs a human unless its principal names a
// person (as_user) and it comes through the dashboard or a terminal
// client; an automation token never passes, whatever front end it
// names. Slack members, the operator's terminal and proxy sign-ins pass.
func TestRequireHumanEveryFrontEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, f, _ := newHumanOps(t, ops.Config{RequireHuman: true})
	bot, alice, opsP := principal(t, o, "bot"), principal(t, o, "alice"), principal(t, o, "ops")
	for _, c := range []struct {
		who  string
		c    ops.Caller
		want bool
	}{
		{"bot through the api", ops.PrincipalCaller(bot, ops.FrontAPI), true},
		{"bot through mcp", ops.PrincipalCaller(bot, ops.FrontMCP), true},
		{"bot on the dashboard", ops.PrincipalCaller(bot, ops.FrontDashboard), true},
		{"bot claiming to be a terminal", ops.PrincipalCaller(bot, ops.FrontTerminal), true},
		{"bot with no way of proof said", ops.Caller{Identity: bot.ID(), Principal: bot.Name, FrontEnd: ops.FrontTerminal}, true},
		{"alice through the api", ops.PrincipalCaller(alice, ops.FrontAPI), true},
		{"alice through mcp", ops.PrincipalCaller(alice, ops.FrontMCP), true},
		{"alice on the dashboard", ops.PrincipalCaller(alice, ops.FrontDashboard), false},
		{"alice's terminal client", ops.PrincipalCaller(alice, ops.FrontTerminal), false},
		{"alice's terminal through the api", withClient(ops.PrincipalCaller(alice, ops.FrontAPI), ops.FrontTerminal), false},
		{"bot's terminal through the api", withClient(ops.PrincipalCaller(bot, ops.FrontAPI), ops.FrontTerminal), true},
		{"alice's mcp through the api", withClient(ops.PrincipalCaller(alice, ops.FrontAPI), ops.FrontMCP), true},
		{"ops through the proxy", ops.ProxyCaller(opsP), false},
		{"a Slack member", ops.SlackCaller("U0ALICE001"), false},
		{"the operator's terminal", ops.TerminalCaller(o.Policy(), "nobody"), false},
	} {
		if got := o.NeedsHuman(c.c); got != c.want {
			t.Errorf("%s: needs a human %v, want %v", c.who, got, c.want)
		}
		if !c.want {
			continue
		}
		before := f.changes()
		for _, a := range stateChanges {
			if got := code(a.do(ctx, o, c.c)); got != ops.NeedsHuman {
				t.Errorf("%s %s: %s, want %s", c.who, a.name, got, ops.NeedsHuman)
			}
		}
		if n := f.changes() - before; n != 0 {
			t.Errorf("%s: the engine was asked to change %d thing(s)", c.who, n)
		}
	}
	if got := code(err2(o.Control(ctx, ops.PrincipalCaller(alice, ops.FrontDashboard), engine.ControlResume, "r_1"))); got != "ok" {
		t.Errorf("alice resumes on the dashboard: %s", got)
	}
}

// withClient is c as a program (the terminal, dlqbot mcp) calling the
// server's API for its user says it is (the DLQBOT-Client header).
func withClient(c ops.Caller, client string) ops.Caller {
	c.Client = client
	return c
}

// TestNothingHappensUnrecorded: once the audit trail takes no more
// entries from a principal (its rate in the real store), its approve,
// resume, park and cancel are refused unavailable and the engine is
// asked nothing; its pause, the brake, still goes through.
func TestNothingHappensUnrecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, err := commands.ParsePolicy([]byte(humanPolicy))
	if err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testkit.Redis(t)
	// One minute of the trail's rate, held still: the test never
	// straddles two minutes.
	st, err := store.New(store.Config{Prefix: prefix, AuditRate: 2}, rdb, stillClock{time.Date(2026, 12, 6, 12, 0, 30, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	f := &parkCounting{fakeEngine: &fakeEngine{}}
	o, err := ops.New(ops.Config{Policy: p}, ops.Deps{Engine: f, Tokens: f, Replays: f, Windows: st.Windows(), Audit: st.Audit()})
	if err != nil {
		t.Fatal(err)
	}
	alice := ops.SlackCaller("U0ALICE001")
	for i := 0; i < 2; i++ { // fill alice's minute
		if err := err2(o.Control(ctx, alice, engine.ControlPause, "r_1")); err != nil {
			t.Fatalf("pause %d: %v", i, err)
		}
	}
	before := f.changes()
	for _, a := range stateChanges {
		if got := code(a.do(ctx, o, alice)); got != ops.Unavailable {
			t.Errorf("%s with a full trail: %s, want %s", a.name, got, ops.Unavailable)
		}
	}
	if n := f.changes() - before; n != 0 {
		t.Errorf("the engine was asked to change %d thing(s) that could not be recorded", n)
	}
	if err := err2(o.Control(ctx, alice, engine.ControlPause, "r_1")); err != nil {
		t.Errorf("pause with a full trail: %v, want the brake open", err)
	}
}

// stillClock is a clock that never moves.
type stillClock struct{ t time.Time }

func (c stillClock) Now() time.Time                       { return c.t }
func (c stillClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

// TestWorkerRequireHumanFromTheRecord: a process that does not apply
// DLQBOT_MCP_REQUIRE_HUMAN approves for every caller of the front-end
// table; a worker that applies it refuses exactly the approvals its own
// ops would have refused (NeedsHuman), from what the record says: the
// approver and the front end it came through. An automation principal
// (no as_user) passes only where it could have come without its token
// (batch at the terminal, ops through the proxy); a resume, whose record
// names only who, is refused when that is a token-only automation
// principal. Without RequireHuman the worker runs them all.
func TestWorkerRequireHumanFromTheRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// NoHandOff: the approval's record as the engine returned it.
	open, _, _ := newHumanOps(t, ops.Config{NoHandOff: true})
	worker, _, _ := newHumanOps(t, ops.Config{RequireHuman: true})
	lax, _, _ := newHumanOps(t, ops.Config{})
	bot, alice, opsP := principal(t, open, "bot"), principal(t, open, "alice"), principal(t, open, "ops")
	for _, c := range []struct {
		who string
		c   ops.Caller
	}{
		{"bot through the api", ops.PrincipalCaller(bot, ops.FrontAPI)},
		{"bot through mcp", ops.PrincipalCaller(bot, ops.FrontMCP)},
		{"bot on the dashboard", ops.PrincipalCaller(bot, ops.FrontDashboard)},
		{"bot claiming to be a terminal", ops.PrincipalCaller(bot, ops.FrontTerminal)},
		{"bot's terminal through the api", withClient(ops.PrincipalCaller(bot, ops.FrontAPI), ops.FrontTerminal)},
		{"alice through the api", ops.PrincipalCaller(alice, ops.FrontAPI)},
		{"alice through mcp", ops.PrincipalCaller(alice, ops.FrontMCP)},
		{"alice's mcp through the api", withClient(ops.PrincipalCaller(alice, ops.FrontAPI), ops.FrontMCP)},
		{"alice on the dashboard", ops.PrincipalCaller(alice, ops.FrontDashboard)},
		{"alice's terminal through the api", withClient(ops.PrincipalCaller(alice, ops.FrontAPI), ops.FrontTerminal)},
		{"ops through the proxy", ops.ProxyCaller(opsP)},
		{"batch at the terminal", ops.TerminalCaller(open.Policy(), "batch")},
		{"a Slack member", ops.SlackCaller("U0ALICE001")},
	} {
		out, err := open.Approve(ctx, c.c, ops.Approval{Token: "p_U0OTHER001"})
		if err != nil {
			t.Fatalf("%s: the open process refused: %v", c.who, err)
		}
		r := out.Replay
		refused := worker.AuthorizeRun(ctx, r, "")
		if want := worker.NeedsHuman(c.c); (refused != nil) != want {
			t.Errorf("%s (recorded as %s via %q): worker refused: %v; its ops say needs a human: %v", c.who, r.Approver, r.ApprovedVia, refused, want)
		}
		if err := lax.AuthorizeRun(ctx, r, ""); err != nil {
			t.Errorf("%s: refused without RequireHuman: %v", c.who, err)
		}
	}
	bySlack := engine.Replay{ID: "r_1", Token: "p_U0OTHER001", DLQ: "q", Approver: "U0OTHER001", ApprovedVia: ops.FrontSlack}
	for _, c := range []struct {
		resumer string
		refused bool
	}{
		{bot.ID(), true},
		{principal(t, open, "batch").ID(), false},
		{opsP.ID(), false},
		{alice.ID(), false},
	} {
		if err := worker.AuthorizeRun(ctx, bySlack, c.resumer); (err != nil) != c.refused {
			t.Errorf("resumed by %s: refused: %v, want refused %v", c.resumer, err, c.refused)
		}
		if err := lax.AuthorizeRun(ctx, bySlack, c.resumer); err != nil {
			t.Errorf("resumed by %s without RequireHuman: %v", c.resumer, err)
		}
	}
}
