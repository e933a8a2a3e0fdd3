package ops_test

import (
	"context"
	"errors"
	"strings"
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

// fakeEngine stands in for the engine (which is tested against
// RabbitMQ); the windows are the store's, on the real Redis. It knows one
// token per requester ("p_<requester>", 60 messages out of q) and one
// paused replay.
type fakeEngine struct {
	mu       sync.Mutex
	changed  bool // Approve answers ErrChanged
	approved []string
	controls []string
	// since is the verdict on the target's consumers in every token (Load).
	since engine.Since
	// arrivals are every preview's.
	arrivals *engine.Arrivals
}

func (f *fakeEngine) Preview(_ context.Context, sel engine.Selection, req string) (*engine.Preview, error) {
	p := &engine.Preview{Token: "p_" + req, Requester: req, DLQ: engine.QueueInfo{Name: sel.DLQ}, Arrivals: f.arrivals}
	if f.since != "" {
		p.Targets = []engine.TargetView{{Queue: "t", Exists: true, Consumers: 1, ConsumersSinceFailure: f.since}}
	}
	return p, nil
}
func (f *fakeEngine) Compare(context.Context, string) (engine.Frozen, []engine.Change, error) {
	return engine.Frozen{}, nil, nil
}
func (f *fakeEngine) ApproveConfirmed(_ context.Context, token, by, via string, p engine.Params, _ string) (engine.Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changed {
		return engine.Approval{Changes: []engine.Change{{Kind: engine.ChangeMessagesGone, Detail: "gone"}}}, engine.ErrChanged
	}
	f.approved = append(f.approved, token+" by "+by)
	r := engine.Replay{ID: "r_" + token, Token: token, DLQ: "q", Approver: by, ApprovedVia: via, Params: p}
	if p.TakeOver {
		r.TookOver = map[string]int{"r_0ld0000000000000": 30}
	}
	return engine.Approval{Replay: r}, nil
}
func (f *fakeEngine) Control(_ context.Context, id string, a engine.ControlAction, by string) (engine.Replay, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.controls = append(f.controls, string(a)+" by "+by)
	return engine.Replay{ID: id, DLQ: "q", State: engine.StatePaused}, nil
}
func (f *fakeEngine) Enqueue(context.Context, string) error { return nil }
func (f *fakeEngine) Status(_ context.Context, id string) (engine.Replay, error) {
	return engine.Replay{ID: id, DLQ: "q", Token: "p_U0OTHER001", State: engine.StatePaused}, nil
}
func (f *fakeEngine) Check(context.Context, string, string) (engine.CheckReport, error) {
	return engine.CheckReport{}, nil
}
func (f *fakeEngine) Park(context.Context, string, string) (engine.ParkResult, error) {
	return engine.ParkResult{}, nil
}
func (f *fakeEngine) LoadHeader(ctx context.Context, token string) (engine.Frozen, error) {
	return f.Load(ctx, token)
}

func (f *fakeEngine) Load(_ context.Context, token string) (engine.Frozen, error) {
	return engine.Frozen{Token: token, DLQ: "q", Requester: token[2:], Total: 60,
		Targets: []engine.TargetSnapshot{{Queue: "t", ConsumersSinceFailure: f.since}}}, nil
}
func (f *fakeEngine) Discard(context.Context, string) error              { return nil }
func (f *fakeEngine) List(context.Context, int) ([]engine.Replay, error) { return nil, nil }

func newOps(t *testing.T, policy string, cfg ops.Config) (*ops.Ops, *fakeEngine, *testkit.Trail) {
	t.Helper()
	o, f, tr, _ := newOpsOn(t, policy, cfg, nil)
	return o, f, tr
}

// newOpsOn is newOps, also returning the store, with more of ops.Deps
// set by with (nil: none).
func newOpsOn(t *testing.T, policy string, cfg ops.Config, with func(*ops.Deps, *store.Store)) (*ops.Ops, *fakeEngine, *testkit.Trail, *store.Store) {
	t.Helper()
	p, err := commands.ParsePolicy([]byte(policy))
	if err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, tr := &fakeEngine{}, &testkit.Trail{}
	cfg.Policy = p
	d := ops.Deps{Engine: f, Tokens: f, Replays: f, Windows: st.Windows(), Audit: tr}
	if with != nil {
		with(&d, st)
	}
	o, err := ops.New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	return o, f, tr, st
}

const policy = `principals:
  - name: alice
    as_user: U0ALICE001
    os_users: [alice]
  - name: ci
    os_users: [ci]
    needs_human: true
roles:
  - name: sre
    users: [U0ALICE001, U0OTHER001]
    principals: [ci]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
  - name: viewers
    users: [U0VIEWER01]
    grants:
      - queues: ["*"]
        actions: [read]
approval:
  require_distinct_approver: 100
`

func code(err error) ops.Code {
	if r, ok := ops.IsRefusal(err); ok {
		return r.Code
	}
	if err != nil {
		return "error: " + ops.Code(err.Error())
	}
	return "ok"
}

// TestPolicyInOps: the decisions ops makes whichever front end asks —
// cancel needs replay while pause needs read, an OS user the policy does
// not name may change nothing, a principal that needs a human may not
// resume, the terminal's alice is Slack's alice for the four-eyes rule,
// and a self-approval that the engine then refuses gives its count back.
// Each call is recorded once, and each done that changes something is
// announced as begun before.
func TestPolicyInOps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, f, tr := newOps(t, policy, ops.Config{})
	viewer, stranger := ops.SlackCaller("U0VIEWER01"), ops.TerminalCaller(o.Policy(), "mallory")
	termAlice, ci := ops.TerminalCaller(o.Policy(), "alice"), ops.TerminalCaller(o.Policy(), "ci")
	for _, c := range []struct {
		name string
		err  error
		want ops.Code
	}{
		{"viewer pauses", err2(o.Control(ctx, viewer, engine.ControlPause, "r_1")), "ok"},
		{"viewer cancels", err2(o.Control(ctx, viewer, engine.ControlCancel, "r_1")), ops.Forbidden},
		{"unnamed OS user pauses", err2(o.Control(ctx, stranger, engine.ControlPause, "r_1")), ops.Forbidden},
		{"unnamed OS user previews", err2(o.Preview(ctx, stranger, engine.Selection{DLQ: "q"})), ops.Forbidden},
		{"ci resumes", err2(o.Control(ctx, ci, engine.ControlResume, "r_1")), ops.NeedsHuman},
		{"ci pauses", err2(o.Control(ctx, ci, engine.ControlPause, "r_1")), "ok"},
		{"terminal alice approves Slack alice's", err2(o.Approve(ctx, termAlice, ops.Approval{Token: "p_U0ALICE001"})), "ok"},
		{"a second 60 of her own", err2(o.Approve(ctx, ops.SlackCaller("U0ALICE001"), ops.Approval{Token: "p_U0ALICE001"})), ops.NeedsSecondPerson},
		{"someone else's", err2(o.Approve(ctx, ops.SlackCaller("U0ALICE001"), ops.Approval{Token: "p_U0OTHER001"})), "ok"},
	} {
		if got := code(c.err); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	if n, begun := len(tr.Find("", "", "")), len(tr.Find("", "", audit.OutcomeBegun)); n-begun != 9 || begun != 4 {
		t.Errorf("%d outcomes recorded for 9 operations, and %d begun for the 4 done that change something", n-begun, begun)
	}
	if len(f.controls) != 2 || len(f.approved) != 2 {
		t.Errorf("the engine was asked %v and %v", f.controls, f.approved)
	}

	// A self-approval the engine refuses (the world changed) does not
	// count: after it, the next one of the same size still fits.
	o2, f2, _ := newOps(t, policy, ops.Config{})
	f2.changed = true
	if got := code(err2(o2.Approve(ctx, termAlice, ops.Approval{Token: "p_U0ALICE001"}))); got != ops.Changed {
		t.Fatalf("changed world: %s", got)
	}
	f2.changed = false
	if got := code(err2(o2.Approve(ctx, termAlice, ops.Approval{Token: "p_U0ALICE001"}))); got != "ok" {
		t.Fatalf("after a refused self-approval: %s, want its count given back", got)
	}
	if !errors.Is(err2(o2.Approve(ctx, ops.SlackCaller("U0NOBODY01"), ops.Approval{Token: "p_x"})), commands.ErrForbidden) {
		t.Fatal("a Forbidden refusal does not wrap commands.ErrForbidden")
	}
}

func err2[T any](_ T, err error) error { return err }

// TestTakeOverInTheTrail: an approval that took messages over from
// another replay says so, naming it, in the audit trail.
func TestTakeOverInTheTrail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, _, tr := newOps(t, policy, ops.Config{})
	if _, err := o.Approve(ctx, ops.SlackCaller("U0ALICE001"), ops.Approval{Token: "p_U0OTHER001", Params: engine.Params{TakeOver: true}}); err != nil {
		t.Fatal(err)
	}
	es := tr.Find("", audit.OpApprove, audit.OutcomeOK)
	if len(es) != 1 || !strings.Contains(es[0].Detail, "took over 30 message(s) from r_0ld0000000000000") {
		t.Fatalf("the trail has %+v; want the approval naming the take-over", es)
	}
}

// TestApprovalRecordsItsFrontEnd: the replay an approval makes names the
// front end the approver came through; a terminal calling the server's
// API for its user is the terminal, not the API.
func TestApprovalRecordsItsFrontEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, _, _ := newOps(t, policy, ops.Config{NoHandOff: true})
	alice := o.Policy().Principals[0]
	client := ops.PrincipalCaller(alice, ops.FrontAPI)
	client.Client = ops.FrontTerminal
	for _, c := range []struct {
		name string
		c    ops.Caller
		want string
	}{
		{"Slack", ops.SlackCaller("U0ALICE001"), ops.FrontSlack},
		{"terminal", ops.TerminalCaller(o.Policy(), "alice"), ops.FrontTerminal},
		{"terminal through the server", client, ops.FrontTerminal},
		{"HTTP API", ops.PrincipalCaller(alice, ops.FrontAPI), ops.FrontAPI},
		{"MCP", ops.PrincipalCaller(alice, ops.FrontMCP), ops.FrontMCP},
		{"dashboard", ops.PrincipalCaller(alice, ops.FrontDashboard), ops.FrontDashboard},
	} {
		ap, err := o.Approve(ctx, c.c, ops.Approval{Token: "p_U0OTHER001"})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if ap.Replay.ApprovedVia != c.want {
			t.Errorf("%s: approved via %q, want %q", c.name, ap.Replay.ApprovedVia, c.want)
		}
	}
}

// TestPolicyQueries: MayControl answers what Control would decide for the
// caller, changing and recording nothing; AuditVisible shows the entries
// of DLQs the caller may read and its own (as a principal) that name no
// DLQ.
func TestPolicyQueries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, f, tr := newOps(t, policy, ops.Config{})
	r := engine.Replay{ID: "r_1", DLQ: "q", Token: "p_U0OTHER001", State: engine.StatePaused}
	viewer, alice := ops.SlackCaller("U0VIEWER01"), ops.TerminalCaller(o.Policy(), "alice")
	ci, stranger := ops.TerminalCaller(o.Policy(), "ci"), ops.TerminalCaller(o.Policy(), "mallory")
	for _, c := range []struct {
		name   string
		caller ops.Caller
		action engine.ControlAction
		want   bool
	}{
		{"viewer pauses", viewer, engine.ControlPause, true},
		{"viewer cancels", viewer, engine.ControlCancel, false},
		{"viewer resumes", viewer, engine.ControlResume, false},
		{"alice resumes", alice, engine.ControlResume, true},
		{"ci resumes", ci, engine.ControlResume, false},
		{"ci cancels", ci, engine.ControlCancel, false}, // cancel needs a human too
		{"unnamed OS user pauses", stranger, engine.ControlPause, false},
	} {
		if got := o.MayControl(ctx, c.caller, c.action, r); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if len(f.controls) != 0 || len(tr.Find("", "", "")) != 0 {
		t.Errorf("the queries changed %v or recorded %v", f.controls, tr.Find("", "", ""))
	}

	p, err := commands.ParsePolicy([]byte(`principals:
  - name: alice
    as_user: U0ALICE001
    os_users: [alice]
roles:
  - name: orders
    users: [U0ALICE001]
    grants:
      - queues: ["orders.*"]
        actions: [read]
`))
	if err != nil {
		t.Fatal(err)
	}
	o2, err := ops.New(ops.Config{Policy: p}, ops.Deps{Engine: f, Tokens: f, Replays: f, Windows: noWindows{}})
	if err != nil {
		t.Fatal(err)
	}
	visible := o2.AuditVisible(ctx, ops.TerminalCaller(p, "alice"))
	for _, c := range []struct {
		e    audit.Entry
		want bool
	}{
		{audit.Entry{DLQ: "orders.dlq", Identity: "U0BOB00001"}, true},
		{audit.Entry{DLQ: "payments.dlq", Identity: "U0ALICE001"}, false},
		{audit.Entry{Identity: "U0ALICE001"}, true},        // her own, as Slack's alice
		{audit.Entry{Identity: "terminal:alice"}, true},    // her own, at the terminal
		{audit.Entry{Identity: "terminal:mallory"}, false}, // someone else's
	} {
		if got := visible(c.e); got != c.want {
			t.Errorf("entry %+v visible: %v, want %v", c.e, got, c.want)
		}
	}
}

// noWindows is a Windows that never counts (the queries take nothing).
type noWindows struct{}

func (noWindows) Take(context.Context, string, int, int, time.Duration) (ops.Take, error) {
	return ops.Take{OK: true}, nil
}
func (noWindows) Give(context.Context, string, string) error { return nil }

// TestSamplesAndChannels: the samples of a preview go to a reader of its
// DLQ only, whoever made it, and each decision is recorded; a preview
// asked for in a channel its DLQ's allowlist does not name is refused
// (Forbidden), and allowed in a channel it names.
func TestSamplesAndChannels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, _, tr := newOps(t, policy+`channels:
  - queues: ["q"]
    allow: [C_OK]
`, ops.Config{})
	if dlq, err := o.Samples(ctx, ops.SlackCaller("U0VIEWER01"), "p_U0ALICE001", ""); err != nil || dlq != "q" {
		t.Fatalf("a reader's samples: %q %v", dlq, err)
	}
	if _, err := o.Samples(ctx, ops.SlackCaller("U0STRANGER"), "p_U0ALICE001", "q"); code(err) != ops.Forbidden {
		t.Fatalf("a stranger's samples: %v", err)
	}
	if ok, refused := tr.Find(ops.FrontSlack, audit.OpSamples, audit.OutcomeOK), tr.Find(ops.FrontSlack, audit.OpSamples, audit.OutcomeRefused); len(ok) != 1 || len(refused) != 1 {
		t.Fatalf("trail: %d shown, %d refused; want 1 and 1", len(ok), len(refused))
	}
	_, err := o.Preview(ctx, ops.SlackCaller("U0ALICE001").InChannel("C_ELSE"), engine.Selection{DLQ: "q"})
	if code(err) != ops.Forbidden {
		t.Fatalf("a preview in another channel: %v", err)
	}
	if _, err := o.Preview(ctx, ops.SlackCaller("U0ALICE001").InChannel("C_OK"), engine.Selection{DLQ: "q"}); err != nil {
		t.Fatalf("a preview in its channel: %v", err)
	}
}
