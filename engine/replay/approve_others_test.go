package replay_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// countingClaims is the real store's claims with a count of the per-id
// reads an approval makes (Holders).
type countingClaims struct {
	engine.Claims
	holders atomic.Int64
}

func (c *countingClaims) Holders(ctx context.Context, dlq, replay string, ids []string) (map[string]engine.Claim, error) {
	c.holders.Add(1)
	return c.Claims.Holders(ctx, dlq, replay, ids)
}

// TestApprovalReadsNoIDsWhenNoReplayIsLive: replay A replays the first 10
// of a DLQ of 30 and finishes; a preview of the other 20 made more than
// the summary's skew later is approved without a per-id read of the
// claims (their summary shows A ended before the preview), and its replay
// sends the 20 exactly once. A preview made while a replay B of the same
// DLQ is paused is approved with the per-id read, which names B as the
// owner of the overlap.
func TestApprovalReadsNoIDsWhenNoReplayIsLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var cc *countingClaims
	e := newEnvTuned(t, fast, testkit.Rabbit3, func(d *replay.Deps) {
		cc = &countingClaims{Claims: d.Claims}
		d.Claims = cc
	})
	r := e.rabbit
	src, dlq := r.DeadLetteredAs(nil, 30, 50)
	rec := &recorder{}
	r.Consume(src, rec.handle)
	prm := engine.Params{Step: 10, Cap: 10, Rate: -1, Timeout: 30 * time.Second}
	a := approveRun(t, e, preview(t, e, engine.Selection{DLQ: dlq, Limit: 10}).Token, prm, false)
	if a.State != engine.StateFinished || a.Sent != 10 {
		t.Fatalf("A: %s, sent %d: %s", a.State, a.Sent, a.Note)
	}
	// A's last claim write is more than the skew behind the next preview.
	done := time.Now()
	testkit.Eventually(t, time.Minute, "the summary's skew to pass after A", func() bool { return time.Since(done) > 6*time.Second })
	p := preview(t, e, engine.Selection{DLQ: dlq})
	before := cc.holders.Load()
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", prm, false)
	if err != nil {
		t.Fatalf("approval: %v, %+v", err, ap.Changes)
	}
	if n := cc.holders.Load() - before; n != 0 {
		t.Errorf("the approval read the claims per id %d time(s); the summary shows no live replay", n)
	}
	b, err := e.svc.Run(ctx, ap.Replay.ID, "owner-b")
	if err != nil || b.State != engine.StateFinished || b.Sent != 20 {
		t.Fatalf("B: %v, %s, sent %d: %s", err, b.State, b.Sent, b.Note)
	}
	testkit.Eventually(t, 30*time.Second, "30 copies at the consumer", func() bool { return len(rec.got()) >= 30 })
	for id, n := range ids(rec.got()) {
		if n != 1 {
			t.Errorf("%s reached the consumer %d times", id, n)
		}
	}

	// A live (paused) replay of a DLQ: the approval reads per id.
	_, dlq2 := r.DeadLetteredAs(nil, 5, 50)
	pc := preview(t, e, engine.Selection{DLQ: dlq2})
	pd := preview(t, e, engine.Selection{DLQ: dlq2})
	apc, err := replay.Approve(e.svc, ctx, pc.Token, "U_APP", prm, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Control(ctx, apc.Replay.ID, engine.ControlPause, "U_APP"); err != nil {
		t.Fatal(err)
	}
	before = cc.holders.Load()
	apd, _ := replay.Approve(e.svc, ctx, pd.Token, "U_APP", prm, false)
	if cc.holders.Load() == before {
		t.Errorf("the approval beside paused %s did not read the claims per id", apc.Replay.ID)
	}
	held := 0
	for _, c := range apd.Changes {
		if c.Kind == engine.ChangeHeldByReplay && c.Replay == apc.Replay.ID {
			held += c.Messages
		}
	}
	if held != 5 {
		t.Errorf("the approval beside paused %s shows %d held by it, want 5: %+v", apc.Replay.ID, held, apd.Changes)
	}
}
