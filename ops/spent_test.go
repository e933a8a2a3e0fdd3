package ops_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
	"github.com/stroma/dlqbot/store"
)

// storeTokens are the store's real tokens (on Redis) behind the ops
// Tokens port, with the fake engine's approvals consuming them.
type consumingEngine struct {
	fakeEngine
	tokens *store.Tokens
}

func (c *consumingEngine) ApproveConfirmed(ctx context.Context, token, by, via string, p engine.Params, digest string) (engine.Approval, error) {
	if err := c.tokens.Consume(ctx, token, "r_"+token[:8]); err != nil {
		return engine.Approval{}, err
	}
	return c.fakeEngine.ApproveConfirmed(ctx, token, by, via, p, digest)
}

// someQueues is a broker that has only the queues it names.
type someQueues map[string]bool

func (q someQueues) ListQueues(context.Context) ([]engine.QueueListing, error) { return nil, nil }
func (q someQueues) Inspect(_ context.Context, name string) (engine.QueueInfo, error) {
	return engine.QueueInfo{Name: name, Exists: q[name]}, nil
}

// TestSpentTokenDecidesFirst: a token that already started a replay is
// refused as token_used whoever approves it again — its own requester
// (whom the four-eyes rule would also stop) and a viewer without the
// grant — because no one could get past a spent token.
func TestSpentTokenDecidesFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, err := commands.ParsePolicy([]byte(policy))
	if err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := &consumingEngine{tokens: st.Tokens()}
	o, err := ops.New(ops.Config{Policy: p}, ops.Deps{Engine: eng, Tokens: st.Tokens(), Replays: eng, Windows: st.Windows(),
		Queues: someQueues{"q": true}})
	if err != nil {
		t.Fatal(err)
	}
	token, err := st.Tokens().Save(ctx, engine.Frozen{DLQ: "q", Requester: "U0ALICE001", Total: 200,
		Targets: []engine.TargetSnapshot{{Queue: "t"}}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	alice, other := ops.SlackCaller("U0ALICE001"), ops.SlackCaller("U0OTHER001")
	if got := code(err2(o.Approve(ctx, alice, ops.Approval{Token: token}))); got != ops.NeedsSecondPerson {
		t.Fatalf("the requester approving her unused token: %s, want %s", got, ops.NeedsSecondPerson)
	}
	if got := code(err2(o.Approve(ctx, other, ops.Approval{Token: token}))); got != "ok" {
		t.Fatalf("a second person approving: %s", got)
	}
	for _, c := range []struct {
		name string
		who  ops.Caller
	}{
		{"its requester again", alice},
		{"the approver again", other},
		{"a viewer without replay", ops.SlackCaller("U0VIEWER01")},
	} {
		err := err2(o.Approve(ctx, c.who, ops.Approval{Token: token}))
		if got := code(err); got != ops.TokenUsed {
			t.Errorf("%s: %s, want %s", c.name, got, ops.TokenUsed)
		}
		if !errors.Is(err, engine.ErrTokenUsed) {
			t.Errorf("%s: the refusal does not wrap engine.ErrTokenUsed", c.name)
		}
	}
	if got := code(err2(o.Approve(ctx, alice, ops.Approval{Token: "p_" + token[2:] + "x"}))); got != ops.TokenExpired {
		t.Errorf("an unknown token: %s, want %s", got, ops.TokenExpired)
	}

	// A DLQ deleted since the preview comes next: before the grants and
	// the four-eyes rule.
	goneTok, err := st.Tokens().Save(ctx, engine.Frozen{DLQ: "deleted", Requester: "U0ALICE001", Total: 200,
		Targets: []engine.TargetSnapshot{{Queue: "t"}}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []ops.Caller{alice, ops.SlackCaller("U0VIEWER01"), ops.SlackCaller("U0NOBODY01")} {
		if got := code(err2(o.Approve(ctx, who, ops.Approval{Token: goneTok}))); got != ops.QueueNotFound {
			t.Errorf("%s approving a preview of a deleted DLQ: %s, want %s", who.Identity, got, ops.QueueNotFound)
		}
	}
}
