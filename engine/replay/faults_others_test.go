package replay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestAnotherReaderTakesFromTheDLQAfterAFault: a paced replay of 1,000
// loses its connection after 300 copies and stops. Before it is resumed,
// another reader takes 150 messages from the head of the DLQ and acks
// them: there lie the originals the loss left behind (those of duplicates
// and of copies in doubt) and the first ones not sent yet. Resumed, the
// replay sends the rest and nothing twice, and what it says is checked
// against the broker: missing exactly the taken messages it never sent,
// duplicates exactly the confirmed copies whose originals the DLQ still
// holds, sent + in doubt + missing the whole preview, and no message lost.
// On a DLQ whose reads spend delivery attempts (quorum on 4.0) the run does
// not count again: its counts are the last count's, an upper bound, and
// its words say so.
func TestAnotherReaderTakesFromTheDLQAfterAFault(t *testing.T) {
	t.Parallel()
	eachDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		const n, k = 1000, 150
		f := newFaultRun(t, on, dlqArgs, n, stopAtOnce)
		e, ctx := f.e, context.Background()
		rep := <-f.runAndCut(t, n, 100, 300)
		if rep.State == engine.StateFinished && rep.Sent == n {
			t.Fatal("the fault came too late: the replay finished")
		}
		f.expectStoppedByFault(t, rep)
		f.account(t, "after the fault", rep.ID)
		t.Logf("after the fault: sent %d, duplicates %d, in doubt %d", rep.Sent, rep.Duplicates, rep.InDoubt)

		f.takeFromDLQ(t, k)
		recorded := f.ledgerMessageIDs(t, rep.ID)
		wantMissing, wantTaken := 0, 0
		for mid := range f.taken {
			pending, ok := recorded[mid]
			switch {
			case !ok:
				wantMissing++
			case pending:
				wantTaken++
			}
		}
		t.Logf("the other reader took %d, %d of them never sent by the replay", k, wantMissing)
		atTarget := ids(f.rec.got())

		if _, err := e.svc.Control(ctx, rep.ID, engine.ControlResume, "U_RESUMER"); err != nil {
			t.Fatal(err)
		}
		rep, err := e.svc.Run(ctx, rep.ID, "owner2")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("resumed: state %s, sent %d, missing %d, duplicates %d, in doubt %d: %s",
			rep.State, rep.Sent, rep.Missing, rep.Duplicates, rep.InDoubt, rep.Note)
		// Finished only with nothing missing and nothing in doubt (a loss
		// may leave no copy in doubt); stopped otherwise, saying what is
		// in doubt when something is.
		finished := wantMissing == 0 && rep.InDoubt == 0
		if (rep.State == engine.StateFinished) != finished || (rep.State != engine.StateFinished && rep.State != engine.StateStopped) ||
			(rep.InDoubt > 0) != strings.Contains(rep.Note, "in doubt") {
			t.Fatalf("resumed replay %s with %d in doubt and %d missing: %s; want finished only with neither, else stopped saying what is in doubt", rep.State, rep.InDoubt, wantMissing, rep.Note)
		}
		if rep.Missing != wantMissing || rep.Sent+rep.InDoubt+rep.Missing != n || rep.Failed != 0 || rep.Elsewhere != 0 {
			t.Fatalf("resumed replay: %d sent + %d in doubt + %d missing (want %d missing), %d failed, %d elsewhere; want the %d previewed",
				rep.Sent, rep.InDoubt, rep.Missing, wantMissing, rep.Failed, rep.Elsewhere, n)
		}
		f.account(t, "after resuming", rep.ID)
		if budgeted := on.Name == testkit.Rabbit4.Name && dlqArgs != nil; budgeted && rep.CountStale {
			// A quorum DLQ on 4.0 spends a delivery attempt per read: the
			// run does not count again (unless its counts were never
			// reconciled), and says its counts are the last count's, which
			// is an upper bound of what the broker holds.
			twice, confirmed := f.heldTwice(t, rep.ID)
			t.Logf("after resuming: the broker holds %d message(s) twice (%d with confirmed copies); the replay counts %d duplicates + %d in doubt at the last count",
				twice, confirmed, rep.Duplicates, rep.InDoubt)
			stale := rep.Duplicates+rep.InDoubt == 0 || strings.Contains(rep.Note, "at the last count")
			if rep.InDoubtTaken != 0 || !stale || confirmed > rep.Duplicates || twice > rep.Duplicates+rep.InDoubt {
				t.Errorf("resumed replay on a budgeted DLQ: count_stale %v, %d in doubt taken, %d duplicates and %d in doubt against %d and %d the broker holds: %s; want the last count's, said so",
					rep.CountStale, rep.InDoubtTaken, rep.Duplicates, rep.InDoubt, confirmed, twice, rep.Note)
			}
		} else {
			// The copies in doubt whose originals the other reader took
			// are named so: the DLQ does not hold them any more.
			if rep.CountStale || rep.InDoubtTaken != wantTaken || (wantTaken > 0 && !strings.Contains(rep.Note, "something else took the original")) {
				t.Errorf("resumed replay counts %d in doubt with their originals taken (count_stale %v), the other reader took %d of them: %s", rep.InDoubtTaken, rep.CountStale, wantTaken, rep.Note)
			}
			f.expectCountedTwice(t, "after resuming", rep)
		}
		for mid, c := range ids(f.rec.got()) {
			if was := atTarget[mid]; (was > 0 && c != was) || (was == 0 && c != 1) {
				t.Errorf("%s reached the target %d time(s), %d before resuming: want what was sent once sent never again", mid, c, was)
			}
			if f.taken[mid] > 0 && atTarget[mid] == 0 {
				t.Errorf("%s, taken from the DLQ by the other reader, was sent after resuming", mid)
			}
		}
	})
}

// takeFromDLQ is another reader of the DLQ: it takes k messages from its
// head and acks them (f.taken).
func (f *faultRun) takeFromDLQ(t *testing.T, k int) {
	t.Helper()
	got := f.e.rabbit.Drain(f.dlq, k, 10*time.Second)
	if len(got) != k {
		t.Fatalf("the other reader took %d of the DLQ's messages, want %d", len(got), k)
	}
	f.taken = ids(got)
}

// ledgerMessageIDs returns the message ids the replay's ledger has an
// entry for, each true when its copy is in doubt (pending), false when
// confirmed.
func (f *faultRun) ledgerMessageIDs(t *testing.T, replayID string) map[string]bool {
	t.Helper()
	entries, err := f.e.store.Ledger().Entries(context.Background(), replayID)
	if err != nil {
		t.Fatal(err)
	}
	msgID := map[string]string{} // fingerprint → message_id
	for _, m := range f.p.Messages {
		msgID[m.ID] = m.MessageID
	}
	out := map[string]bool{}
	for _, en := range entries {
		mid, ok := msgID[en.ID]
		if !ok {
			mid = en.ID
		}
		out[mid] = en.Pending
	}
	return out
}
