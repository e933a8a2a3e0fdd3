package replay_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// blindTarget is a broker that cannot inspect its target queue once (a
// busy broker's passive declare or read marks timing out): the first
// inspection that would show the first step's copies there (ready ≥
// after) fails; every other call goes to the real broker.
type blindTarget struct {
	engine.Broker
	target string
	after  int
	failed atomic.Bool
}

func (b *blindTarget) Inspect(ctx context.Context, q string) (engine.QueueInfo, error) {
	st, err := b.Broker.Inspect(ctx, q)
	if err == nil && q == b.target && st.Ready >= b.after && b.failed.CompareAndSwap(false, true) {
		return engine.QueueInfo{}, errors.New("inspect timed out")
	}
	return st, err
}

// TestATargetThatCannotBeInspectedSettlesNothing: when a step cannot read
// its target's ready count right after its confirms, nothing consumes the
// target, and the count is readable again later, the step must still see
// that none of its copies left: "settled" is what was observed, never a
// count taken as 0. (Before, the failed read stood for a ready count of
// 0, and the next readable count made every copy "left the target".)
func TestATargetThatCannotBeInspectedSettlesNothing(t *testing.T) {
	t.Parallel()
	var blind *blindTarget
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	e := newTapEnv(t, testkit.Rabbit3, fast, func(d *replay.Deps) {
		blind = &blindTarget{Broker: d.Broker, target: src, after: 10}
		d.Broker = blind
	})
	r := e.rabbit
	r.Topology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(30, 100)...)
	r.WaitCount(dlq, 30, 30*time.Second)
	p := preview(t, &e.env, engine.Selection{DLQ: dlq})
	ctx := context.Background()
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Rate: -1, Timeout: 2 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner-"+t.Name())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !blind.failed.Load() {
		t.Fatal("no inspection of the target failed: the test proves nothing")
	}
	if rep.State != engine.StateStopped || rep.Settled != 0 {
		t.Fatalf("replay %s after %d sent: %d settled (%s); nothing consumed %s, so none may be called settled", rep.State, rep.Sent, rep.Settled, rep.Note, src)
	}
	if !strings.Contains(rep.Note, "none of the") || !strings.Contains(rep.Note, "settled within") {
		t.Fatalf("note %q does not say none settled", rep.Note)
	}
	if n := r.Count(src); n != rep.Sent {
		t.Fatalf("%s holds %d, the replay sent %d", src, n, rep.Sent)
	}
}
