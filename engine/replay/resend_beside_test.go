package replay_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// resendHold is the broker's mover whose first sending move once armed
// (a pass: its request rewrites headers) stops before its first publish
// until released, holding unacked every message of the DLQ its read
// passed on the way to its first pick.
type resendHold struct {
	engine.Mover
	armed   atomic.Bool
	holding chan struct{} // closed when the armed move holds its read
	release chan struct{}
	once    sync.Once
}

func newResendHold(m engine.Mover) *resendHold {
	return &resendHold{Mover: m, holding: make(chan struct{}), release: make(chan struct{})}
}

func (h *resendHold) Move(ctx context.Context, req engine.MoveRequest) (engine.MoveResult, error) {
	if req.Rewrite == nil || !h.armed.CompareAndSwap(true, false) {
		return h.Mover.Move(ctx, req)
	}
	inner, first := req.Continue, true
	req.Continue = func() error {
		if first {
			first = false
			close(h.holding)
			<-h.release
		}
		if inner == nil {
			return nil
		}
		return inner()
	}
	return h.Mover.Move(ctx, req)
}

func (h *resendHold) letGo() { h.once.Do(func() { close(h.release) }) }

// TestAPreviewBesideAResendNamesItAndEndsAtOnce: an unpaced replay of
// 3,000 loses its connection with copies in doubt, and resume
// resend=in-doubt resends them. The resend reads the DLQ afresh, with no
// cursor and no claims of its own, and its read holds every message it
// passes until its move ends; here its move stops before its first
// publish for longer than twice the lease time (the life of a reading
// mark: 4 s). A preview of the same DLQ at once, another once the hold
// has outlasted the marks' life, and a check of the replay meanwhile
// each end within 10 s and count the messages held as held by that
// replay, naming it, never another client. Released, the resume
// finishes: every original acked, the DLQ holding none of the selection,
// its duplicates counted exactly (expectFinishedClean). A quorum and a
// classic DLQ, on brokers that can leave copies in doubt (inDoubtBrokers).
func TestAPreviewBesideAResendNamesItAndEndsAtOnce(t *testing.T) {
	t.Parallel()
	everyDLQKindOn(t, inDoubtBrokers(), func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		const n = 3000
		wait := 2 * time.Minute
		lr := newLossRun(t, on, dlqArgs, n, 0, false)
		rep := lr.loseConnection(t, max(n/10, 200), wait)
		rep = lr.loseUntilInDoubt(t, rep, max(n/10, 200), wait)
		a := lr.snapshot(t, rep.ID, wait)
		if a.inDoubt == 0 {
			t.Skipf("the connection losses left no copy in doubt to resend (%s): RabbitMQ confirmed the copies in flight", rep.Note)
		}
		id := rep.ID
		hm, held, ttl := heldResendEngine(t, lr.e)
		ctx := context.Background()
		if _, err := lr.e.svc.Control(ctx, id, engine.ControlResumeResend, "U_RESUMER"); err != nil {
			t.Fatal(err)
		}
		hm.armed.Store(true)
		t.Cleanup(hm.letGo)
		rctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		done := make(chan engine.Replay, 1)
		go func() {
			r, err := held.Run(rctx, id, "owner-resend")
			if err != nil {
				t.Errorf("resend: %v", err)
			}
			done <- r
		}()
		select {
		case <-hm.holding:
		case r := <-done:
			t.Fatalf("the resend ended (%s: %s) before its move held the DLQ", r.State, r.Note)
		case <-time.After(wait):
			t.Fatal("the resend's move did not begin")
		}
		holdStart := time.Now()
		besideResend(t, lr, id, "a preview at once")
		// The resend's run does not come back from its move while it is
		// held: its mark lives on only if it is refreshed meanwhile.
		testkit.Eventually(t, 2*ttl+5*time.Second, "the hold past twice the marks' life", func() bool { return time.Since(holdStart) > 2*ttl })
		besideResend(t, lr, id, "a preview after twice the marks' life")
		start := time.Now()
		c, err := lr.e.svc.Check(ctx, id, "")
		if err != nil {
			t.Fatalf("check of %s during its resend: %v", id, err)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("the check took %s beside the resend", took)
		}
		if h := c.HeldByReplay; h == nil || len(h.Replays) != 1 || h.Replays[0] != id || h.Messages == 0 {
			t.Errorf("the check of %s during its resend says held by %+v, want %s holding messages", id, h, id)
		}
		t.Logf("the resend's move held the DLQ for %s", time.Since(holdStart).Round(100*time.Millisecond))
		hm.letGo()
		select {
		case rep = <-done:
		case <-time.After(wait):
			t.Fatalf("the resend did not end within %s of its release", wait)
		}
		t.Logf("resumed (resend): %s, sent %d, resent %d, duplicates %d, acked %d: %s", rep.State, rep.Sent, rep.Resent, rep.Duplicates, rep.DuplicatesAcked, rep.Note)
		if strings.Contains(rep.Note, "another client") {
			t.Errorf("the resend's note names another client: %s", rep.Note)
		}
		lr.expectFinishedClean(t, a, rep, wait)
	})
}

// heldResendEngine is a second engine on e's broker and store whose mover
// is a resendHold, without a tap (as newLossRun's), with a lease time
// (and reading marks' life) of ttl.
func heldResendEngine(t *testing.T, e *env) (*resendHold, *replay.Service, time.Duration) {
	t.Helper()
	const ttl = 4 * time.Second
	cfg := fast
	cfg.LeaseTTL = ttl
	hm := newResendHold(e.broker)
	st := e.store
	svc, err := replay.New(cfg, replay.Deps{Broker: e.broker, Mover: hm, Counters: e.broker, Tokens: st.Tokens(), Ledger: st.Ledger(),
		Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(), Jobs: st.Jobs(), Registry: st.Workers(), Claims: st.Claims(), Consumers: testkit.ConsumersOff{}, Watches: testkit.WatchesOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, TapGaps: testkit.TapOff{}})
	if err != nil {
		t.Fatal(err)
	}
	return hm, svc, ttl
}

// besideResend previews lr's whole DLQ while replay id's resend holds it:
// the preview ends within 10 s and names id, alone, as holding the
// messages it could not read.
func besideResend(t *testing.T, lr *lossRun, id, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	p, err := lr.e.svc.Preview(ctx, engine.Selection{DLQ: lr.dlq}, "U_SIDE")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%s beside the resend failed after %s: %v", what, took, err)
	}
	if took > 10*time.Second {
		t.Errorf("%s took %s beside the resend", what, took)
	}
	h := p.HeldByReplay
	t.Logf("%s in %s: coverage %+v, held by %+v", what, took.Round(time.Millisecond), p.Coverage, h)
	// Messages is 0 when the broker could not say how many the other
	// consumer held (RabbitMQ 4.3 may report none queued then).
	if h == nil || len(h.Replays) != 1 || h.Replays[0] != id || h.Messages < p.Coverage.HeldElsewhere {
		t.Errorf("%s says held by %+v, want %s holding messages", what, h, id)
		return
	}
	if pr := p.Problems; len(pr) == 0 || pr[0].Kind != engine.ProblemPartialRead || !strings.Contains(pr[0].Detail, "held by replay "+id) {
		t.Errorf("%s: its first problem does not name %s holding messages: %+v", what, id, pr)
	}
}

// loseUntilInDoubt resumes rep plainly and cuts the engine's connection
// again once share more copies arrived, while no loss has left a copy in
// doubt, up to maxLosses cuts in all and while a third of the selection
// is left (a loss leaves copies in doubt only when it cuts copies in
// flight); it returns the replay as the last cut left it.
func (lr *lossRun) loseUntilInDoubt(t *testing.T, rep engine.Replay, share int, wait time.Duration) engine.Replay {
	t.Helper()
	e, ctx, n := lr.e, context.Background(), len(lr.originals)
	for loss := 2; rep.InDoubt == 0 && loss <= maxLosses && rep.Sent+share < n*2/3; loss++ {
		if _, err := e.svc.Control(ctx, rep.ID, engine.ControlResume, "U_RESUMER"); err != nil {
			t.Fatal(err)
		}
		names := lr.connNames(t)
		before := len(lr.rec.got())
		done := make(chan engine.Replay, 1)
		go func(id string) { r, _ := e.svc.Run(ctx, id, "owner-again"); done <- r }(rep.ID)
		testkit.Eventually(t, wait, "copies delivered before the fault", func() bool { return len(lr.rec.got()) >= before+share })
		testkit.Eventually(t, 30*time.Second, "the engine's connection closed", func() bool { return lr.cut(t, names) > 0 })
		select {
		case rep = <-done:
		case <-time.After(wait):
			t.Fatalf("the replay did not end within %s of its connection closing", wait)
		}
		if rep.State == engine.StateFinished {
			t.Fatalf("loss %d came too late: the replay finished: %s", loss, rep.Note)
		}
		lr.expectStoppedByFault(t, rep)
		t.Logf("after loss %d: sent %d, duplicates %d, in doubt %d", loss, rep.Sent, rep.Duplicates, rep.InDoubt)
	}
	return rep
}

// inDoubtBrokers is the brokers on which a connection closed during an
// unpaced replay can leave copies in doubt (not those that confirm before
// they close it: testkit.Broker.ConfirmsBeforeClose), so that a test of a
// resend does not spend its losses and skip.
func inDoubtBrokers() []testkit.Broker {
	var out []testkit.Broker
	for _, b := range testkit.Brokers() {
		if !b.ConfirmsBeforeClose() {
			out = append(out, b)
		}
	}
	return out
}
