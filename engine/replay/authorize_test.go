package replay_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// gate is an Authorizer that refuses while closed and keeps every question.
type gate struct {
	mu     sync.Mutex
	closed bool
	asked  []string // "<replay>/<resumed by>"
}

func (g *gate) AuthorizeRun(_ context.Context, r engine.Replay, resumedBy string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, r.ID+"/"+resumedBy)
	if g.closed {
		return errors.New("its approver U_APP lacks `publish` on the target")
	}
	return nil
}

func (g *gate) set(closed bool) { g.mu.Lock(); g.closed = closed; g.mu.Unlock() }
func (g *gate) questions() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.asked...)
}

// TestWorkerAsksItsAuthorizer: a worker asks its Authorizer before a
// replay's first send (no resumer) and again on a resume (naming who
// resumed it). Refused, the replay ends stopped with the reason in its
// note and a stopped event, and the target receives nothing; resumed and
// allowed, it sends everything.
func TestWorkerAsksItsAuthorizer(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var kinds []engine.EventKind
	note := engine.NotifierFunc(func(_ context.Context, ev engine.Event) {
		mu.Lock()
		kinds = append(kinds, ev.Kind)
		mu.Unlock()
	})
	e := newEnvTuned(t, fast, testkit.Rabbit3, func(d *replay.Deps) { d.Notifier = note })
	src, dlq := e.rabbit.DeadLettered(3, 20)
	rc := &recorder{}
	e.rabbit.Consume(src, rc.handle)
	received := func() int { rc.mu.Lock(); defer rc.mu.Unlock(); return len(rc.ds) }
	g := &gate{closed: true}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.svc.Work(ctx, engine.WorkerConfig{Block: 100 * time.Millisecond, Authorizer: g})
	}()
	t.Cleanup(func() { cancel(); <-done })

	p := preview(t, e, engine.Selection{DLQ: dlq})
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{}, false)
	if err != nil {
		t.Fatal(err)
	}
	id := ap.Replay.ID
	if err := e.svc.Enqueue(ctx, id); err != nil {
		t.Fatal(err)
	}
	var r engine.Replay
	testkit.Eventually(t, 30*time.Second, "the refusal", func() bool {
		r, err = e.store.Replays().Get(ctx, id)
		return err == nil && r.State == engine.StateStopped
	})
	if r.Sent != 0 || !strings.Contains(r.Note, "refused by the worker's permissions policy") || !strings.Contains(r.Note, "lacks `publish`") {
		t.Fatalf("refused: sent %d, note %q", r.Sent, r.Note)
	}
	if n := received(); n != 0 {
		t.Fatalf("the target received %d", n)
	}
	// The record is written before its event is sent: wait for the event.
	evs := func() []engine.EventKind {
		mu.Lock()
		defer mu.Unlock()
		return append([]engine.EventKind(nil), kinds...)
	}
	testkit.Eventually(t, 10*time.Second, "the stopped event", func() bool { return len(evs()) > 0 })
	if got := evs(); len(got) != 1 || got[0] != engine.EventStopped {
		t.Errorf("events %v, want one stopped", got)
	}

	g.set(false)
	if _, err := e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the allowed resume to end", func() bool {
		r, err = e.store.Replays().Get(ctx, id)
		return err == nil && r.State.Terminal()
	})
	if r.State != engine.StateFinished || received() != 3 {
		t.Fatalf("after the allowed resume: %s (%s), received %d", r.State, r.Note, received())
	}
	if q := g.questions(); len(q) != 2 || q[0] != id+"/" || q[1] != id+"/U_RESUMER" {
		t.Fatalf("the worker asked %q", q)
	}
}
