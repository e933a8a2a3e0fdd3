package replay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestPausedReplayKeepsWhatItOwns is issue 22's "A paused while B runs":
// A (150 messages) is approved, sends some and is paused; B (200, 100 in
// common with A) is approved now and runs to the end. The approval shows
// the overlap A owns (held_by_replay, naming A); B sends only its own
// messages and finishes, calling none missing: what A sent is "replayed
// by r_A" and what A only planned is "left to r_A". With takeover=yes
// instead, B sends what A owns and has not sent, and A, resumed, leaves
// those ("taken over by r_B"). Either way A resumed finishes, and the
// consumer received every message exactly once. Decided on the consumer
// and the DLQ. The same holds when A's approval owned only its first ten
// messages and A's run owned the rest (Config.Tune.OwnAtApproval).
func TestPausedReplayKeepsWhatItOwns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		takeOver bool
		ownAt    int
	}{{"left", false, 0}, {"takeover", true, 0}, {"left-owned-by-run", false, 10}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Who owns what is the engine's and the store's: the run's
			// ownership is checked on one broker.
			brokers := testkit.Brokers()
			if tc.ownAt > 0 {
				brokers = []testkit.Broker{testkit.Rabbit3}
			}
			everyDLQKindOn(t, brokers, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
				pausedOwner(t, on, dlqArgs, tc.takeOver, tc.ownAt)
			})
		})
	}
}

// pausedOwner is one case of TestPausedReplayKeepsWhatItOwns; ownAt, when
// not 0, is Config.Tune.OwnAtApproval: A's approval owns only its first ownAt
// messages and A's run owns the rest beside its first step.
func pausedOwner(t *testing.T, on testkit.Broker, dlqArgs amqp.Table, takeOver bool, ownAt int) {
	onlyA, both, onlyB := 50, 100, 100
	n := onlyA + both + onlyB
	if dlqArgs != nil {
		dlqArgs = testkit.Quorum(amqp.Table{"x-delivery-limit": 200})
	}
	cfg := fast
	cfg.Tune.OwnAtApproval = ownAt
	e := newEnvOn(t, cfg, on)
	r := e.rabbit
	src, dlq := r.DeadLetteredAs(dlqArgs, n, 100)
	all := preview(t, e, engine.Selection{DLQ: dlq})
	var idsA, idsB []string
	common := map[string]bool{}
	for i, m := range all.Messages {
		if i < onlyA+both {
			idsA = append(idsA, m.ID)
		}
		if i >= onlyA {
			idsB = append(idsB, m.ID)
		}
		if i >= onlyA && i < onlyA+both {
			common[m.MessageID] = true
		}
	}
	pa := preview(t, e, engine.Selection{DLQ: dlq, IDs: idsA})
	pb := preview(t, e, engine.Selection{DLQ: dlq, IDs: idsB})
	rec := &recorder{}
	r.Consume(src, rec.handle)
	ctx := context.Background()

	// A sends its first steps (its own 50 first: DLQ order), then pauses.
	apA, err := replay.Approve(e.svc, ctx, pa.Token, "U_A", engine.Params{Step: 20, Cap: 40, Rate: 200, Timeout: 30 * time.Second}, true)
	if err != nil {
		t.Fatal(err)
	}
	a := apA.Replay.ID
	if ownAt > 0 && apA.Replay.OwnFrom != ownAt {
		t.Fatalf("A's approval owned up to %d, want its first %d (the run owns the rest)", apA.Replay.OwnFrom, ownAt)
	}
	runA := runAsyncReplay(t, e, a, "owner-a")
	testkit.Eventually(t, 2*time.Minute, "A sent 60 messages", func() bool {
		rep, err := e.svc.Status(ctx, a)
		return err == nil && rep.Sent >= 60
	})
	if _, err := e.svc.Control(ctx, a, engine.ControlPause, "U_A"); err != nil {
		t.Fatal(err)
	}
	var repA engine.Replay
	select {
	case repA = <-runA:
	case <-time.After(time.Minute):
		t.Fatal("A did not pause within a minute")
	}
	if repA.State != engine.StatePaused {
		t.Fatalf("A is %s, want paused: %s", repA.State, repA.Note)
	}
	sentByA := map[string]bool{}
	for _, d := range rec.got() {
		if d.Headers["x-replay-id"] == a {
			sentByA[d.MessageId] = true
		}
	}
	// What A has not sent (its plan) it still owns; the broker says what it sent.
	testkit.Eventually(t, 30*time.Second, "A's copies at the consumer", func() bool {
		got := 0
		for _, d := range rec.got() {
			if d.Headers["x-replay-id"] == a {
				got++
			}
		}
		return got == repA.Sent
	})
	for _, d := range rec.got() {
		if d.Headers["x-replay-id"] == a {
			sentByA[d.MessageId] = true
		}
	}
	ownedByA := 0
	for id := range common {
		if !sentByA[id] {
			ownedByA++
		}
	}
	if ownedByA == 0 {
		t.Fatalf("A sent all %d common messages before its pause; the test needs some left", both)
	}

	// B's approval shows what A owns, and names A.
	prm := engine.Params{Step: 50, Cap: 100, Rate: -1, Timeout: 30 * time.Second, TakeOver: takeOver}
	if _, err := replay.Approve(e.svc, ctx, pb.Token, "U_B", prm, false); err == nil {
		t.Fatal("B's approval overlapping paused A went through unconfirmed; want the overlap shown first")
	}
	apB, err := replay.Approve(e.svc, ctx, pb.Token, "U_B", prm, true)
	if err != nil {
		t.Fatal(err)
	}
	b := apB.Replay.ID
	shown := 0
	for _, c := range apB.Changes {
		if c.Kind == engine.ChangeHeldByReplay && c.Replay == a {
			shown += c.Messages
		}
	}
	if shown != ownedByA {
		t.Errorf("B's approval shows %d message(s) held by %s, want %d (A's unsent common ones): %+v", shown, a, ownedByA, apB.Changes)
	}
	if takeOver && apB.Replay.TookOver[a] != ownedByA {
		t.Errorf("B took over %v, want %d from %s", apB.Replay.TookOver, ownedByA, a)
	}
	repB, err := e.svc.Run(ctx, b, "owner-b")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("B: %s, sent %d of %d, elsewhere %d: %s", repB.State, repB.Sent, repB.Total, repB.Elsewhere, repB.Note)
	wantB := onlyB + both - len(sentByA) + onlyAIn(sentByA, common)
	if !takeOver {
		wantB = onlyB
	}
	if repB.State != engine.StateFinished || repB.Missing != 0 || repB.Sent != wantB || repB.Sent+repB.Elsewhere != repB.Total {
		t.Errorf("B ended %s, sent %d (want %d), elsewhere %d, missing %d of %d: %s", repB.State, repB.Sent, wantB, repB.Elsewhere, repB.Missing, repB.Total, repB.Note)
	}
	if !strings.Contains(repB.Note, a) {
		t.Errorf("B's note does not name %s: %s", a, repB.Note)
	}
	if takeOver && !strings.Contains(repB.Note, "took over") {
		t.Errorf("B's note does not say it took over: %s", repB.Note)
	}
	for _, f := range repB.Failures {
		if f.Kind == engine.FailureMissing || f.Kind == engine.FailureHeldElsewhere {
			t.Errorf("B: %s %s: %s", f.ID, f.Kind, f.Detail)
		}
	}

	// A resumed finishes; with a take-over it leaves what B took.
	if _, err := e.svc.Control(ctx, a, engine.ControlResume, "U_A"); err != nil {
		t.Fatal(err)
	}
	repA, err = e.svc.Run(ctx, a, "owner-a2")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("A: %s, sent %d of %d, elsewhere %d: %s", repA.State, repA.Sent, repA.Total, repA.Elsewhere, repA.Note)
	if repA.State != engine.StateFinished || repA.Missing != 0 || repA.Sent+repA.Elsewhere != repA.Total {
		t.Errorf("A ended %s, sent %d, elsewhere %d, missing %d of %d: %s", repA.State, repA.Sent, repA.Elsewhere, repA.Missing, repA.Total, repA.Note)
	}
	if takeOver && (repA.Elsewhere != ownedByA || !strings.Contains(repA.Note, "taken over by "+b)) {
		t.Errorf("A left %d to others (want %d taken over by %s): %s", repA.Elsewhere, ownedByA, b, repA.Note)
	}
	if !takeOver && repA.Elsewhere != 0 {
		t.Errorf("A left %d message(s) to others, want none (it owned them): %s", repA.Elsewhere, repA.Note)
	}

	// The broker's side: every message exactly once, by the replay that owned it.
	testkit.Eventually(t, 60*time.Second, "every message at the consumer", func() bool { return len(rec.got()) >= n && r.Count(src) == 0 })
	by := ids(rec.got())
	for _, m := range all.Messages {
		if by[m.MessageID] != 1 {
			t.Errorf("%s delivered %d times", m.MessageID, by[m.MessageID])
		}
	}
	for _, d := range rec.got() {
		id, _ := d.Headers["x-replay-id"].(string)
		switch {
		case common[d.MessageId] && !sentByA[d.MessageId] && takeOver && id != b:
			t.Errorf("%s (taken over) delivered by %s, want %s", d.MessageId, id, b)
		case common[d.MessageId] && !takeOver && id != a:
			t.Errorf("%s (owned by A) delivered by %s, want %s", d.MessageId, id, a)
		}
	}
	if left := r.Count(dlq); left != 0 {
		t.Errorf("the DLQ still holds %d messages", left)
	}
}

// onlyAIn counts the ids A sent that are not common (its own 50).
func onlyAIn(sentByA, common map[string]bool) int {
	k := 0
	for id := range sentByA {
		if !common[id] {
			k++
		}
	}
	return k
}

// TestLaterApprovalLeavesWhatWasReplayedSinceItsPreview is issue 23's
// "per window of copies, the ledger refuses ids another replay sent after
// the preview was made": two overlapping previews are made, A is approved
// and runs to the end, and only then is B approved (its changes confirmed)
// and run. B sends only what A did not, and names A as the replay that
// sent the overlap; the consumer received every message exactly once.
func TestLaterApprovalLeavesWhatWasReplayedSinceItsPreview(t *testing.T) {
	t.Parallel()
	everyDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		onlyA, both, onlyB := 30, 60, 40
		n := onlyA + both + onlyB
		e := newEnvOn(t, fast, on)
		r := e.rabbit
		src, dlq := r.DeadLetteredAs(dlqArgs, n, 100)
		all := preview(t, e, engine.Selection{DLQ: dlq})
		var idsA, idsB []string
		for i, m := range all.Messages {
			if i < onlyA+both {
				idsA = append(idsA, m.ID)
			}
			if i >= onlyA {
				idsB = append(idsB, m.ID)
			}
		}
		pa := preview(t, e, engine.Selection{DLQ: dlq, IDs: idsA})
		pb := preview(t, e, engine.Selection{DLQ: dlq, IDs: idsB})
		rec := &recorder{}
		r.Consume(src, rec.handle)
		ctx := context.Background()
		prm := engine.Params{Step: 50, Cap: 200, Rate: -1, Timeout: 30 * time.Second}
		apA, err := replay.Approve(e.svc, ctx, pa.Token, "U_A", prm, false)
		if err != nil {
			t.Fatal(err)
		}
		a := apA.Replay.ID
		repA, err := e.svc.Run(ctx, a, "owner-a")
		if err != nil || repA.State != engine.StateFinished {
			t.Fatalf("A: %v, %s: %s", err, repA.State, repA.Note)
		}
		testkit.Eventually(t, 30*time.Second, "A's copies at the consumer", func() bool { return len(rec.got()) >= onlyA+both })

		apB, err := replay.Approve(e.svc, ctx, pb.Token, "U_B", prm, true)
		if err != nil {
			t.Fatal(err)
		}
		b := apB.Replay.ID
		repB, err := e.svc.Run(ctx, b, "owner-b")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("B: %s, sent %d of %d, elsewhere %d: %s", repB.State, repB.Sent, repB.Total, repB.Elsewhere, repB.Note)
		if repB.State != engine.StateFinished || repB.Sent != onlyB || repB.Elsewhere != both || repB.Missing != 0 {
			t.Errorf("B ended %s, sent %d (want %d), elsewhere %d (want %d), missing %d: %s", repB.State, repB.Sent, onlyB, repB.Elsewhere, both, repB.Missing, repB.Note)
		}
		if !strings.Contains(repB.Note, "replayed by "+a) {
			t.Errorf("B's note does not name %s as the replay that sent the overlap: %s", a, repB.Note)
		}

		// The consumer: each message once; the overlap came from A.
		testkit.Eventually(t, 60*time.Second, "every message at the consumer", func() bool { return len(rec.got()) >= n && r.Count(src) == 0 })
		got := rec.got()
		by := ids(got)
		for _, m := range all.Messages {
			if by[m.MessageID] != 1 {
				t.Errorf("%s delivered %d times", m.MessageID, by[m.MessageID])
			}
		}
		inB := map[string]bool{}
		for _, m := range all.Messages[onlyA+both:] {
			inB[m.MessageID] = true
		}
		for _, d := range got {
			if id := d.Headers["x-replay-id"]; (inB[d.MessageId] && id != b) || (!inB[d.MessageId] && id != a) {
				t.Errorf("%s delivered by %v", d.MessageId, id)
			}
		}
		if left := r.Count(dlq); left != 0 {
			t.Errorf("the DLQ still holds %d messages", left)
		}
	})
}
