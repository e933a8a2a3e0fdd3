package replay_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// holdingMover is the engine's Mover without a cursor (every pass is a
// read of its own) whose first holds passes run while another client
// holds every message ready in the DLQ: it takes them with a consumer,
// cancels that consumer (the broker then counts none on the DLQ), holds
// them through the pass and gives them back the moment the pass returns.
// That is what a reader of another replica does between cancelling its
// consumer and giving its messages back (it drains its last deliveries
// first), and what requeues that land late look like: the pass reads the
// whole DLQ as the broker shows it, no consumer and nothing ready beside
// what it read, and does not find its picks; a look at the broker after
// the pass finds nobody holding anything.
type holdingMover struct {
	engine.Mover
	t testing.TB
	r *testkit.Rabbit

	mu    sync.Mutex
	holds int // passes still to hold through
	held  []int
}

func (h *holdingMover) Move(ctx context.Context, req engine.MoveRequest) (engine.MoveResult, error) {
	h.mu.Lock()
	hold := h.holds > 0
	if hold {
		h.holds--
	}
	h.mu.Unlock()
	if !hold {
		return h.Mover.Move(ctx, req)
	}
	ch, n, err := h.take(req.Queue)
	if err != nil {
		// Not t.Fatal: this runs in the replay's goroutine.
		h.t.Errorf("the holder could not take the DLQ's messages: %v", err)
	}
	mr, moveErr := h.Mover.Move(ctx, req)
	if ch != nil {
		if err := ch.Nack(0, true, true); err != nil {
			h.t.Errorf("the holder could not give its messages back: %v", err)
		}
		_ = ch.Close()
	}
	h.mu.Lock()
	h.held = append(h.held, n)
	h.mu.Unlock()
	return mr, moveErr
}

// take consumes every message ready in queue on a channel of its own,
// cancels the consumer and returns the channel, which holds them unacked.
func (h *holdingMover) take(queue string) (*amqp.Channel, int, error) {
	ch, err := h.r.Conn.Channel()
	if err != nil {
		return nil, 0, err
	}
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil || q.Messages == 0 {
		_ = ch.Close()
		return nil, 0, err
	}
	if err := ch.Qos(q.Messages, 0, false); err != nil {
		_ = ch.Close()
		return nil, 0, err
	}
	tag := testkit.Name("holder")
	ds, err := ch.Consume(queue, tag, false, false, false, false, nil)
	if err != nil {
		_ = ch.Close()
		return nil, 0, err
	}
	timeout := time.After(30 * time.Second)
	for range q.Messages {
		select {
		case <-ds:
		case <-timeout:
			_ = ch.Close()
			return nil, 0, fmt.Errorf("the broker delivered fewer than the %d ready", q.Messages)
		}
	}
	if err := ch.Cancel(tag, false); err != nil {
		_ = ch.Close()
		return nil, 0, err
	}
	return ch, q.Messages, nil
}

// TestPicksHeldThroughWholeReadsAreNotMissing has another client hold
// every message of a classic DLQ through the step's first two passes
// (see holdingMover), letting go after each. Each pass reads the whole
// DLQ as the broker shows it and the broker reports nobody holding
// anything before and after, yet the messages were there all along: the
// step must not call them missing but read again, and the replay must
// finish with each message at the consumer once and the DLQ empty. (A
// quorum DLQ counts a cancelled consumer until its messages are settled,
// so a pass there is never whole while they are held.)
func TestPicksHeldThroughWholeReadsAreNotMissing(t *testing.T) {
	t.Parallel()
	testkit.EachBrokerIn(t, testkit.ClassicOn(t.Name()), func(t *testing.T, on testkit.Broker) {
		const n = 30
		hm := &holdingMover{t: t, holds: 2}
		e := newEnvTuned(t, fast, on, func(d *replay.Deps) {
			hm.Mover = d.Mover
			d.Mover = hm
		})
		hm.r = e.rabbit
		r := e.rabbit
		src, dlq := r.DeadLettered(n, 100)
		p := preview(t, e, engine.Selection{DLQ: dlq})
		got := &counter{}
		r.Consume(src, got.handle)
		rep := approveRun(t, e, p.Token, oneStep, true)
		hm.mu.Lock()
		held := fmt.Sprint(hm.held)
		hm.mu.Unlock()
		if held != fmt.Sprint([]int{n, n}) {
			t.Fatalf("the holder held %s message(s) through the passes, want %d through each of two: the test proves nothing", held, n)
		}
		for _, f := range rep.Failures {
			if f.Kind == engine.FailureMissing {
				t.Errorf("%s called missing: %s", f.ID, f.Detail)
			}
		}
		expectOnce(t, r, rep, n, dlq, got)
	})
}

// expectOnce is expectExact, with each message at the target's consumer
// exactly once.
func expectOnce(t *testing.T, r *testkit.Rabbit, rep engine.Replay, n int, dlq string, got *counter) {
	t.Helper()
	expectExact(t, r, rep, n, dlq, got)
	got.mu.Lock()
	defer got.mu.Unlock()
	for id, k := range got.ids {
		if k != 1 {
			t.Errorf("%s reached the target's consumer %d times", id, k)
		}
	}
}

// TestGoneWhileTheDLQKeepsFillingIsNotCalledMissing: 5 previewed messages
// are consumed by another client before the replay, while new dead
// letters keep reaching the DLQ. Every whole read then leaves the DLQ
// holding messages it did not see, so nothing proves the 5 gone rather
// than among them: the step reads again until HeldWait, then says what it
// could not tell — the 5 not found while messages kept arriving — keeps
// them planned and stops, never "missing". The other 25 reach the
// consumer once each.
func TestGoneWhileTheDLQKeepsFillingIsNotCalledMissing(t *testing.T) {
	t.Parallel()
	cfg := fast
	cfg.Tune.HeldWait = 20 * time.Second // past two statistics samples: quiet moments come, and reads follow them
	e := newEnv(t, cfg)
	r := e.rabbit
	src, dlq := r.DeadLettered(30, 100)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	ch := r.Channel()
	for range 5 { // another client consumes 5 previewed messages
		if _, ok, err := ch.Get(dlq, true); !ok || err != nil {
			t.Fatalf("get from the DLQ: %v, %v", ok, err)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { // new dead letters, all through the replay
		pub, err := r.Conn.Channel()
		if err != nil {
			return
		}
		defer pub.Close()
		for i := 0; ctx.Err() == nil; i++ {
			_ = pub.PublishWithContext(ctx, "", dlq, false, false, testkit.Msg(fmt.Sprintf("new-%d", i), []byte("{}"), nil))
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	got := &counter{}
	r.Consume(src, got.handle)
	rep := approveRun(t, e, p.Token, oneStep, true)
	stop()
	t.Logf("the replay's note: %s", rep.Note)
	held := 0
	for _, f := range rep.Failures {
		if f.Kind == engine.FailureHeldElsewhere {
			held++
		}
	}
	if rep.State != engine.StateStopped || rep.Sent != 25 || rep.Missing != 0 || held != 5 || !strings.Contains(rep.Note, "kept reaching it") {
		t.Fatalf("replay: state %s, sent %d, missing %d, held elsewhere %d: %s; want stopped, 25 sent, the 5 gone held elsewhere (not missing), saying messages kept reaching the DLQ",
			rep.State, rep.Sent, rep.Missing, held, rep.Note)
	}
	testkit.Eventually(t, 30*time.Second, "the 25 sent at the consumer", func() bool { return got.n.Load() >= 25 })
	got.mu.Lock()
	defer got.mu.Unlock()
	for id, k := range got.ids {
		if k != 1 {
			t.Errorf("%s reached the consumer %d times", id, k)
		}
	}
	if len(got.ids) != 25 {
		t.Errorf("the consumer got %d distinct messages, want 25", len(got.ids))
	}
}
