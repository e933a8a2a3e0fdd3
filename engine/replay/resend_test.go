package replay_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// resendSize is the DLQ of the resend test in the normal suite:
// DLQBOT_RESEND_N, else 2,000 under -race (make test) and 5,000 without it
// (the engine is several times faster then, and three losses must come
// before the plan runs out). Issue 22's case 3 has 20,000: make test-all
// runs it (TestResendInDoubtAfterThreeConnectionLossesOf100k).
func resendSize(t *testing.T) int {
	t.Helper()
	def := 5000
	if raceOn {
		// Issue 22's 20,000 is the Of100k stage's. Three losses need a
		// third of this left after two (1,000 was too few).
		def = 2000
	}
	return envScale(t, "DLQBOT_RESEND_N", def)
}

// envScale reads a positive integer from the environment variable name,
// else def.
func envScale(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// TestResendInDoubtAfterThreeConnectionLosses closes the replaying
// engine's broker connection three times during an unpaced replay,
// resuming after each stop, on every broker, from a classic and a quorum
// DLQ (issue 22, case 3). Each stop says what is left. A plain resume then
// sends the rest and stops saying how many are in doubt and how to finish
// them; at that point, decided against the consumer and the DLQ, nothing
// is lost and every message the broker holds twice (delivered and also in
// the DLQ) is counted: exactly the replay's duplicates among those whose
// copies were confirmed, the rest in doubt. Resume resend=in-doubt ends
// the replay finished: every message delivered at least once, every
// delivery carrying the replay's id, a message delivered twice delivered
// at most once without x-dlqbot-possible-duplicate and with one
// x-dlqbot-copy, every sent copy judged settled, and the originals the
// DLQ still holds of delivered copies exactly the replay's duplicates.
func TestResendInDoubtAfterThreeConnectionLosses(t *testing.T) {
	t.Parallel()
	eachDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		resendAfterThreeLosses(t, on, dlqArgs, resendSize(t))
	})
}

// TestResendInDoubtAfterThreeConnectionLossesOf100k is the same at issue
// 22's size, 20,000, without -race, on every broker and queue type with
// DLQBOT_100K_ALL=1 (make test-all); make test runs the 2,000 above on
// every broker and kind.
func TestResendInDoubtAfterThreeConnectionLossesOf100k(t *testing.T) {
	skipUnderRace(t)
	only100kAll(t, "TestResendInDoubtAfterThreeConnectionLosses at 2,000")
	t.Parallel()
	eachDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		resendAfterThreeLosses(t, on, dlqArgs, 20000)
	})
}

// maxLosses bounds the connection losses resendAfterThreeLosses makes
// while waiting for one that leaves a copy in doubt.
const maxLosses = 8

// resendAfterThreeLosses is the body of the resend tests: a DLQ of n with
// dlqArgs on on (see TestResendInDoubtAfterThreeConnectionLosses).
func resendAfterThreeLosses(t *testing.T, on testkit.Broker, dlqArgs amqp.Table, n int) {
	cfg := fast
	cfg.LeaseTTL = 15 * time.Second // the default: long steps on a loaded machine
	f := newFaultRun(t, on, dlqArgs, n, cfg)
	if f.p.Selected != n {
		t.Fatalf("the preview froze %d of the %d dead letters in %s (coverage %+v)", f.p.Selected, n, f.dlq, f.p.Coverage)
	}
	e := f.e
	ctx := context.Background()
	ap, err := replay.Approve(e.svc, ctx, f.p.Token, "U_APP", engine.Params{Step: n, Cap: n, Rate: -1, Timeout: 30 * time.Second}, true)
	if err != nil {
		t.Fatal(err)
	}
	id := ap.Replay.ID
	if _, err := e.svc.Control(ctx, id, engine.ControlResumeResend, "U_X"); !errors.Is(err, engine.ErrNotControllable) {
		t.Fatalf("resend=in-doubt on a queued replay: %v; want ErrNotControllable", err)
	}
	var rep engine.Replay
	// Three losses at least, and more while none has left a copy in doubt
	// and a third of the DLQ is left: a loss leaves copies in doubt only
	// when it cuts copies in flight, and a mover waiting on a slow ledger
	// (a loaded machine) has none; RabbitMQ 4.3 confirms what it has read
	// before it closes a connection.
	more := func(loss int) bool {
		return loss <= 3 || (loss <= maxLosses && rep.InDoubt == 0 && rep.Sent < n*2/3)
	}
	for loss := 1; more(loss); loss++ {
		if loss > 1 {
			if _, err := e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER"); err != nil {
				t.Fatal(err)
			}
		}
		names := f.connNames(t) // so that the fault can come at once
		before := len(f.rec.got())
		done := make(chan engine.Replay, 1)
		go func() { r, _ := e.svc.Run(ctx, id, "owner-"+strconv.Itoa(loss)); done <- r }()
		step := max(100, n/20)
		testkit.Eventually(t, 5*time.Minute, "copies delivered before the fault", func() bool { return len(f.rec.got()) >= before+step })
		// The management API lists a new connection a moment after it opens.
		testkit.Eventually(t, 30*time.Second, "the engine's connection closed", func() bool { return f.cut(t, names) > 0 })
		select {
		case rep = <-done:
		case <-time.After(4 * time.Minute):
			// It settles the cut step and reads the DLQ before it stops.
			t.Fatal("the replay did not end within 4 minutes of its connection closing")
		}
		if rep.State == engine.StateFinished {
			t.Fatalf("loss %d came too late: the replay finished", loss)
		}
		t.Logf("after loss %d: state %s, sent %d, in doubt %d, duplicates %d: %s", loss, rep.State, rep.Sent, rep.InDoubt, rep.Duplicates, rep.Note)
		f.expectStoppedByFault(t, rep)
		if !strings.Contains(rep.Note, fmt.Sprintf("%d of %d sent", rep.Sent, n)) {
			t.Errorf("the stop after loss %d does not say what is left: %s", loss, rep.Note)
		}
	}

	// A plain resume sends the rest; what is in doubt is said, not sent.
	if _, err := e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER"); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if rep, err = e.svc.Run(rctx, id, "owner-rest"); err != nil {
		t.Fatalf("resumed replay: %v", err)
	}
	t.Logf("after the plain resume: state %s, sent %d, in doubt %d, duplicates %d: %s", rep.State, rep.Sent, rep.InDoubt, rep.Duplicates, rep.Note)
	if rep.InDoubt == 0 && on.ConfirmsBeforeClose() {
		// RabbitMQ 4.3 confirms what it has read before it closes a
		// connection: when every loss came after its copies were
		// confirmed, nothing is in doubt and the replay finishes. That is
		// decided against the broker, and the resend is left to the other
		// brokers (its quorum case, and every broker in make test-all).
		if rep.State != engine.StateFinished || rep.Sent != n {
			t.Fatalf("after the plain resume with nothing in doubt: state %s, sent %d of %d: %s; want finished", rep.State, rep.Sent, n, rep.Note)
		}
		f.account(t, "after the plain resume", id)
		f.expectCountedTwice(t, "after the plain resume", rep)
		t.Skipf("RabbitMQ 4.3 confirmed the copies in flight at each of the connection losses: no copy in doubt to resend (%s)", rep.Note)
	}
	if rep.InDoubt == 0 {
		t.Fatalf("no copy in doubt after three or more connection losses (at most %d) during an unpaced replay (state %s: %s)", maxLosses, rep.State, rep.Note)
	}
	entries, err := e.store.Ledger().Entries(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	pending := 0
	for _, en := range entries {
		if en.Pending {
			pending++
		}
	}
	if rep.State != engine.StateStopped || rep.Sent+rep.InDoubt != n || rep.InDoubt != pending || !strings.Contains(rep.Note, "resend=in-doubt") {
		t.Fatalf("after the plain resume: state %s, sent %d + in doubt %d of %d, %d pending in the ledger: %s; want stopped, the sum exact and the resend offered",
			rep.State, rep.Sent, rep.InDoubt, n, pending, rep.Note)
	}
	inDoubt := rep.InDoubt
	if rep.Unreconciled {
		t.Errorf("after the plain resume the counts are still unreconciled: %s", rep.Note)
	}

	// Decided against the broker: what the consumer got and what the
	// DLQ holds (account drains it and puts it back).
	f.account(t, "after the plain resume", id)
	f.expectCountedTwice(t, "after the plain resume", rep)

	// The explicit resend finishes it.
	if _, err := e.svc.Control(ctx, id, engine.ControlResumeResend, "U_RESENDER"); err != nil {
		t.Fatal(err)
	}
	if rep, err = e.svc.Run(rctx, id, "owner-resend"); err != nil {
		t.Fatalf("resend: %v", err)
	}
	t.Logf("after the resend: state %s, sent %d, resent %d, in doubt %d, duplicates %d: %s", rep.State, rep.Sent, rep.Resent, rep.InDoubt, rep.Duplicates, rep.Note)
	if rep.State != engine.StateFinished || rep.Sent != n || rep.InDoubt != 0 || rep.Resent != inDoubt || rep.ResendInDoubt {
		t.Fatalf("after the resend: state %s, sent %d of %d, resent %d of %d in doubt, in doubt %d, asked %v: %s; want finished with every copy in doubt resent",
			rep.State, rep.Sent, n, rep.Resent, inDoubt, rep.InDoubt, rep.ResendInDoubt, rep.Note)
	}
	if _, err := e.svc.Control(ctx, id, engine.ControlResumeResend, "U_X"); !errors.Is(err, engine.ErrNotControllable) {
		t.Errorf("resend=in-doubt on a finished replay: %v; want ErrNotControllable", err)
	}

	// The broker's side: wait until the DLQ is quiet and every message
	// is at the consumer or in the DLQ, then read what the DLQ holds.
	r := e.rabbit
	since := time.Now()
	testkit.Eventually(t, 60*time.Second, "the DLQ quiet and the target drained", func() bool {
		st, err := e.broker.Counters(ctx, f.dlq)
		// A quorum DLQ takes back a read's give-backs late: the broker's
		// sample and its instant count must agree.
		return err == nil && st.SampledAt.After(since.Add(time.Second)) && st.Unacked == 0 && st.Consumers == 0 &&
			r.Count(f.src) == 0 && st.Ready == r.Count(f.dlq)
	})
	left := ids(r.Drain(f.dlq, r.Count(f.dlq), 10*time.Second))
	got := f.rec.got()
	delivered := ids(got)
	for _, mid := range f.originals {
		if delivered[mid] == 0 {
			t.Errorf("%s never delivered (%d in the DLQ)", mid, left[mid])
		}
	}
	plain := map[string]int{}
	copies := map[string]map[string]bool{}
	for _, d := range got {
		if d.Headers["x-replay-id"] != id {
			t.Errorf("%s delivered with x-replay-id %v, want %s", d.MessageId, d.Headers["x-replay-id"], id)
		}
		if d.Headers[engine.PossibleDuplicateHeader] != true {
			plain[d.MessageId]++
		}
		if copies[d.MessageId] == nil {
			copies[d.MessageId] = map[string]bool{}
		}
		tag, _ := d.Headers["x-dlqbot-copy"].(string)
		copies[d.MessageId][tag] = true
	}
	extra, marked := 0, 0
	for mid, k := range delivered {
		if k < 2 {
			continue
		}
		extra += k - 1
		if plain[mid] > 1 {
			t.Errorf("%s delivered %d times, %d of them without %s", mid, k, plain[mid], engine.PossibleDuplicateHeader)
		}
		if len(copies[mid]) != 1 {
			t.Errorf("%s delivered %d times with %d different x-dlqbot-copy values", mid, k, len(copies[mid]))
		}
		marked++
	}
	stale := 0
	for mid, k := range left {
		if delivered[mid] == 0 {
			t.Errorf("%s still in the DLQ and never delivered", mid)
		}
		stale += k
	}
	t.Logf("consumer: %d deliveries of %d messages, %d extra (possible duplicates resent: %d); DLQ: %d originals of delivered copies (counted duplicates %d)",
		len(got), len(delivered), extra, rep.Resent, stale, rep.Duplicates)
	if extra > rep.Resent {
		t.Errorf("%d extra deliveries, but only %d copies were resent", extra, rep.Resent)
	}
	// Exact: the counted read after each loss found the originals whose
	// acks were lost with the connection.
	if stale != rep.Duplicates {
		t.Errorf("the DLQ still holds %d originals of delivered copies, the replay counts %d duplicates", stale, rep.Duplicates)
	}
	// Every sent copy was judged, those of the steps the losses cut too.
	if rep.Settled != rep.Sent {
		t.Errorf("settled %d of %d sent (the steps cut by a lost connection are settled after it)", rep.Settled, rep.Sent)
	}
}
