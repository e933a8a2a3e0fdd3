package replay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	broker "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// TestConnectionsClosedMidReplayLoseNothing closes every broker connection
// of the replaying engine in the middle of a 1,000-message replay, on both
// brokers, from a classic and a quorum DLQ: every message must end in the
// DLQ or the target, and every copy the target got, duplicates included,
// must be in the ledger. Resuming then sends the rest without re-sending
// recorded ones.
func TestConnectionsClosedMidReplayLoseNothing(t *testing.T) {
	t.Parallel()
	eachDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		const n = 1000
		// Reconnect -1: this paced replay stops at the fault, as an unpaced
		// one does, so that resuming is tested (reconnect_test.go: one
		// that goes on).
		f := newFaultRun(t, on, dlqArgs, n, stopAtOnce)
		e := f.e
		ctx := context.Background()
		rep := <-f.runAndCut(t, n, 100, 300)
		id := rep.ID
		var err error
		if rep.State == engine.StateFinished && rep.Sent == n {
			t.Fatal("the fault came too late: the replay finished")
		}
		t.Logf("after the fault: state %s, sent %d, duplicates %d, failed %d: %s", rep.State, rep.Sent, rep.Duplicates, rep.Failed, rep.Note)
		f.expectStoppedByFault(t, rep)

		dups := f.account(t, "after the fault", id)
		f.expectCountedTwice(t, "after the fault", rep)
		for mid, k := range dups {
			if k > 1 {
				t.Errorf("%s duplicated %d times by one fault", mid, k)
			}
		}
		t.Logf("duplicates after one fault: %d (all in the ledger)", len(dups))

		// Resume: the rest is sent, nothing the ledger recorded is sent again.
		if _, err := e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER"); err != nil {
			t.Fatal(err)
		}
		rep, err = e.svc.Run(ctx, id, "owner2")
		// Copies in doubt (no confirm before the connection closed) are never
		// sent again, so such a replay cannot finish: it stops, saying so.
		exact := rep.State == engine.StateFinished && rep.InDoubt == 0
		inDoubt := rep.State == engine.StateStopped && rep.InDoubt > 0 && rep.Sent+rep.InDoubt == n && strings.Contains(rep.Note, "in doubt")
		if err != nil || !(exact || inDoubt) {
			t.Fatalf("resumed replay: %v, state %s, sent %d, in doubt %d: %s", err, rep.State, rep.Sent, rep.InDoubt, rep.Note)
		}
		f.expectNoResend(t, dups, f.account(t, "after resuming", id))
	})
}

// eachDLQKind runs f as subtests "classic/<broker>" and "quorum/<broker>",
// with the DLQ's arguments for the kind (a quorum DLQ with no limit set:
// RabbitMQ 4.x applies its default of 20): classic on the one broker
// testkit.ClassicOn picks for the test, quorum on the one testkit.QuorumOn
// picks (another; these fault runs are long: make test spreads both kinds
// over the three brokers, make test-all runs each on all of them).
func eachDLQKind(t *testing.T, f func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table)) {
	t.Helper()
	eachDLQKindOn(t, testkit.Brokers(), f)
}

// eachDLQKindOn runs f on a classic DLQ on testkit.ClassicOn's broker and
// on a quorum DLQ on the one of quorum testkit.QuorumOn picks (quorumAmong;
// each of them with DLQBOT_CLASSIC_ALL=1).
func eachDLQKindOn(t *testing.T, quorum []testkit.Broker, f func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table)) {
	t.Helper()
	for _, kind := range []struct {
		name    string
		args    amqp.Table
		brokers []testkit.Broker
	}{
		{"classic", nil, testkit.ClassicOn(t.Name())},
		{"quorum", testkit.Quorum(nil), quorumAmong(t.Name(), quorum)},
	} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			testkit.EachBrokerIn(t, kind.brokers, func(t *testing.T, on testkit.Broker) {
				t.Parallel()
				f(t, on, kind.args)
			})
		})
	}
}

// eachDLQKindOnOne is eachDLQKind with the quorum DLQ, too, on one broker
// (testkit.ClassicOn, keyed apart from the classic case so the two may
// differ), every broker with DLQBOT_CLASSIC_ALL=1: for the cases that last
// a minute or more each.
func eachDLQKindOnOne(t *testing.T, f func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table)) {
	t.Helper()
	eachDLQKindOn(t, testkit.ClassicOn(t.Name()+" quorum"), f)
}

// newFaultEnv is an engine on broker on whose broker connection has a name
// of its own, so that a test can close exactly that connection
// (Broker.CloseConnections). With tapped, it finds returns through a tap
// (and so reads the DLQ through a cursor); without, by re-reads.
func newFaultEnv(t *testing.T, on testkit.Broker, tapped bool, cfg ...replay.Config) (*env, string) {
	t.Helper()
	connName := testkit.Name("conn")
	b, err := broker.New(broker.Config{URL: on.AMQPURL, ManagementURL: on.ManagementURL, ConnectionName: connName})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := fast
	if len(cfg) > 0 {
		c = cfg[0]
	}
	d := replay.Deps{Broker: b, Mover: b, Counters: b, Tokens: st.Tokens(), Ledger: st.Ledger(), Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(),
		Jobs: st.Jobs(), Registry: st.Workers(), Claims: st.Claims(), Consumers: testkit.ConsumersOff{}, Watches: testkit.WatchesOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, TapGaps: testkit.TapOff{}}
	if tapped {
		d.Taps, d.Returns, d.TapGaps = b, st.Returns(), st.TapGaps()
	}
	svc, err := replay.New(c, d)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{rabbit: on.Dial(t), broker: b, store: st, svc: svc}
	return e, connName
}

// faultRun is a replay a fault test breaks: a fault engine, a DLQ of n
// dead letters ("m-<i>") previewed, and a recorder consuming the target.
type faultRun struct {
	e         *env
	on        testkit.Broker
	conn      string // the engine's connection name
	src, dlq  string
	p         *engine.Preview
	rec       *recorder
	originals []string
	inDLQ     map[string]int // what account found in the DLQ last
	// taken counts the originals another reader of the DLQ took and
	// acked (takeFromDLQ): account counts them as accounted for.
	taken map[string]int
}

// newFaultRun dead-letters n messages into a DLQ with dlqArgs on on,
// previews it with a fault engine, waits until the management API lists
// the engine's connection and starts the target's recorder.
func newFaultRun(t *testing.T, on testkit.Broker, dlqArgs amqp.Table, n int, cfg ...replay.Config) *faultRun {
	t.Helper()
	e, conn := newFaultEnv(t, on, false, cfg...)
	return startFaultRun(t, e, conn, on, dlqArgs, n, false)
}

// newTappedFaultRun is newFaultRun with a tap (newFaultEnv), on a DLQ fed
// through a dead-letter exchange (testkit.DLXTopology), which a tap needs:
// its replays read the DLQ through a cursor.
func newTappedFaultRun(t *testing.T, on testkit.Broker, dlqArgs amqp.Table, n int, cfg ...replay.Config) *faultRun {
	t.Helper()
	e, conn := newFaultEnv(t, on, true, cfg...)
	return startFaultRun(t, e, conn, on, dlqArgs, n, true)
}

// startFaultRun is newFaultRun's body on the fault engine e (conn: its
// connection's name); dlx feeds the DLQ through a dead-letter exchange.
func startFaultRun(t *testing.T, e *env, conn string, on testkit.Broker, dlqArgs amqp.Table, n int, dlx bool) *faultRun {
	t.Helper()
	var src, dlq string
	if dlx {
		src, dlq = testkit.Name("src"), testkit.Name("dlq")
		e.rabbit.DLXTopology(src, dlq, dlqArgs)
		e.rabbit.Reject(src, testkit.Msgs(n, 200)...)
		e.rabbit.WaitCount(dlq, n, 30*time.Second)
	} else {
		src, dlq = e.rabbit.DeadLetteredAs(dlqArgs, n, 200)
	}
	f := &faultRun{e: e, on: on, conn: conn, src: src, dlq: dlq, rec: &recorder{}}
	f.p = preview(t, e, engine.Selection{DLQ: dlq})
	testkit.Eventually(t, 20*time.Second, "the engine's connection in the management API", func() bool {
		return on.CountConnections(t, conn) > 0
	})
	for i := range n {
		f.originals = append(f.originals, fmt.Sprintf("m-%d", i))
	}
	e.rabbit.Consume(src, f.rec.handle)
	return f
}

// expectStoppedByFault checks that a replay a fault broke ended stopped,
// resumable, saying that the broker connection was lost, with no copy
// called "nacked" (a confirm the closed channel left unanswered is in
// doubt) and nothing missing.
func (f *faultRun) expectStoppedByFault(t *testing.T, rep engine.Replay) {
	t.Helper()
	if rep.State != engine.StateStopped || rep.Missing != 0 {
		t.Fatalf("after the fault: state %s, missing %d: %s; want stopped with nothing missing", rep.State, rep.Missing, rep.Note)
	}
	note := strings.ToLower(rep.Note)
	if !strings.Contains(note, "connection") && !strings.Contains(note, "channel") {
		t.Errorf("the stop does not say the broker connection was lost: %s", rep.Note)
	}
	for _, fl := range rep.Failures {
		if fl.Kind == "nacked" {
			t.Errorf("copy %s called nacked after the channel closed: %s", fl.ID, fl.Detail)
		}
	}
}

// account waits until the DLQ and the target's consumer account for every
// original, and checks against the broker and the ledger that none is
// lost and that every copy the target got (duplicates included) is in the
// replay's ledger. It drains the DLQ to see its exact contents and puts
// them back, and returns the duplicates (message id → extra copies).
func (f *faultRun) account(t *testing.T, stage, replayID string) map[string]int {
	t.Helper()
	r := f.e.rabbit
	n := len(f.originals)
	// A quorum DLQ takes back what a read gave back a while after the read
	// ended: wait until the broker's own counters, sampled after this
	// point, show no reader on the DLQ and nothing unacked there.
	since := time.Now()
	testkit.Eventually(t, 60*time.Second, stage+": the DLQ quiet and DLQ + target accounting for every message", func() bool {
		st, err := f.e.broker.Counters(context.Background(), f.dlq)
		// Every copy already published has reached the consumer too: a copy
		// still waiting in the target is not a later resend.
		return err == nil && st.SampledAt.After(since) && st.Unacked == 0 && st.Consumers == 0 &&
			r.Count(f.src) == 0 && len(f.rec.got())+r.Count(f.dlq)+len(f.taken) >= n
	})
	// A quorum queue on 3.10 applies the returns of a lost connection in
	// bursts, seconds apart, while its counters already say nothing is
	// unacked: a message neither delivered nor drained yet may still be
	// on its way back. Drain what arrives until every original is
	// accounted for, or a minute has passed (then it is lost).
	left := r.Drain(f.dlq, r.Count(f.dlq), 10*time.Second) // by count: a pause is no end
	delivered := ids(f.rec.got())
	lost, dups := testkit.NoneLost(f.originals, f.plusTaken(delivered), ids(left))
	for late := time.Now().Add(time.Minute); len(lost) > 0 && time.Now().Before(late); {
		if k := r.Count(f.dlq); k > 0 {
			left = append(left, r.Drain(f.dlq, k, 10*time.Second)...)
		} else {
			time.Sleep(200 * time.Millisecond) // polling the DLQ's count
		}
		delivered = ids(f.rec.got())
		was := len(lost)
		if lost, dups = testkit.NoneLost(f.originals, f.plusTaken(delivered), ids(left)); len(lost) < was {
			t.Logf("%s: %d of the originals came back to the DLQ after its counters said it was quiet", stage, was-len(lost))
		}
	}
	entries, err := f.e.store.Ledger().Entries(context.Background(), replayID)
	if err != nil {
		t.Fatal(err)
	}
	inLedger := map[string]bool{}
	for _, en := range entries {
		inLedger[en.ID] = true
	}
	byMsgID := map[string]string{} // message_id → fingerprint
	for _, m := range f.p.Messages {
		byMsgID[m.MessageID] = m.ID
	}
	if len(lost) > 0 {
		for _, mid := range lost[:min(5, len(lost))] {
			for _, en := range entries {
				if en.ID == byMsgID[mid] {
					t.Logf("%s: lost %s: ledger %+v", stage, mid, en)
				}
			}
			t.Logf("%s: lost %s: in the DLQ at the stage before: %v", stage, mid, f.inDLQ[mid])
		}
		t.Fatalf("%s: %s", stage, testkit.Describe(lost, dups))
	}
	f.inDLQ = ids(left)
	for mid := range delivered {
		if !inLedger[byMsgID[mid]] {
			t.Errorf("%s: %s reached the target but is not in the ledger (duplicate: %v)", stage, mid, dups[mid] > 0)
		}
	}
	r.Publish(f.dlq, republish(left)...) // put the drained ones back for the next stage
	// At least those: a quorum DLQ on 3.10 can still take back a late burst
	// of a lost connection's returns beside them (the next stage's drain
	// accounts for every message there).
	testkit.Eventually(t, 20*time.Second, stage+": the drained messages back in the DLQ", func() bool { return r.Count(f.dlq) >= len(left) })
	if k := r.Count(f.dlq); k > len(left) {
		t.Logf("%s: %d more in the DLQ than were drained: a late return", stage, k-len(left))
	}
	return dups
}

// plusTaken is delivered (message id → deliveries at the target) with
// what another reader took from the DLQ added.
func (f *faultRun) plusTaken(delivered map[string]int) map[string]int {
	if len(f.taken) == 0 {
		return delivered
	}
	out := make(map[string]int, len(delivered)+len(f.taken))
	for mid, k := range delivered {
		out[mid] = k
	}
	for mid, k := range f.taken {
		out[mid] += k
	}
	return out
}

// expectNoResend checks that resuming sent no message again that already
// had copies before: no message is held more often after (delivered plus
// in the DLQ) than before. The resume acks the originals of confirmed
// copies, so fewer are held twice after it than before.
func (f *faultRun) expectNoResend(t *testing.T, before, after map[string]int) {
	t.Helper()
	for mid, k := range after {
		if k > before[mid] {
			t.Errorf("%s: %d extra copies after resuming, %d before: a recorded send was repeated", mid, k, before[mid])
		}
	}
}

// runAndCut approves f's preview as one paced step of n at rate msg/s,
// runs it in the background, closes the engine's broker connections once
// the consumer has received after copies, and returns the channel the
// run's final record arrives on.
func (f *faultRun) runAndCut(t *testing.T, n int, rate float64, after int) <-chan engine.Replay {
	t.Helper()
	return f.runAndCutAfter(t, n, rate, after, func() {})
}

// runAndCutAfter is runAndCut, calling approved between the approval and
// the run.
func (f *faultRun) runAndCutAfter(t *testing.T, n int, rate float64, after int, approved func()) <-chan engine.Replay {
	t.Helper()
	ctx := context.Background()
	ap, err := replay.Approve(f.e.svc, ctx, f.p.Token, "U_APP", engine.Params{Step: n, Cap: n, Rate: rate, Timeout: 20 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	approved()
	names := f.connNames(t)
	done := make(chan engine.Replay, 1)
	go func() { rep, _ := f.e.svc.Run(ctx, ap.Replay.ID, "owner"); done <- rep }()
	testkit.Eventually(t, 20*time.Second, fmt.Sprintf("%d sent", after), func() bool { return len(f.rec.got()) >= after })
	if f.cut(t, names) == 0 {
		t.Fatal("no connection of the replaying engine found to close")
	}
	return done
}

// connNames connects the engine (if it is not) and returns the management
// API's names of its connection once listed, so that a fault can later
// come as one request (cut): listing connections on a loaded broker can
// take long enough for a step of thousands to finish.
func (f *faultRun) connNames(t *testing.T) []string {
	t.Helper()
	if err := f.e.broker.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	var names []string
	testkit.Eventually(t, 30*time.Second, "the engine's connection in the management API", func() bool {
		names = f.on.ConnectionNames(t, f.conn)
		return len(names) > 0
	})
	return names
}

// cut closes the engine's connections named names (connNames), else,
// should the engine have connected again since, whatever the management
// API lists under its name; it returns how many it closed.
func (f *faultRun) cut(t *testing.T, names []string) int {
	t.Helper()
	if n := f.on.CloseNamed(t, names); n > 0 {
		return n
	}
	return f.on.CloseConnections(t, f.conn)
}

// heldTwice counts, from what account last found (the consumer's
// deliveries and the DLQ's contents), the messages the broker holds twice:
// delivered and also in the DLQ; confirmed are those of them whose copies
// the replay's ledger records as confirmed (not in doubt), which the
// replay must count as its duplicates exactly.
func (f *faultRun) heldTwice(t *testing.T, replayID string) (twice, confirmed int) {
	t.Helper()
	entries, err := f.e.store.Ledger().Entries(context.Background(), replayID)
	if err != nil {
		t.Fatal(err)
	}
	msgID := map[string]string{} // fingerprint → message_id
	for _, m := range f.p.Messages {
		msgID[m.ID] = m.MessageID
	}
	pending := map[string]bool{}
	for _, en := range entries {
		if en.Pending {
			mid, ok := msgID[en.ID]
			if !ok {
				mid = en.ID // not among the preview's listed rows: a message_id is its own id
			}
			pending[mid] = true
		}
	}
	delivered := ids(f.rec.got())
	for mid, k := range f.inDLQ {
		if delivered[mid] > 0 {
			twice += k
			if !pending[mid] {
				confirmed += k
			}
		}
	}
	return twice, confirmed
}

// expectCountedTwice checks the replay's duplicates and in-doubt counts
// against what the broker holds twice (heldTwice, after account): the
// duplicates exactly those with confirmed copies, the rest within the
// copies in doubt.
func (f *faultRun) expectCountedTwice(t *testing.T, stage string, rep engine.Replay) {
	t.Helper()
	twice, confirmed := f.heldTwice(t, rep.ID)
	t.Logf("%s: the broker holds %d message(s) twice (%d with confirmed copies); the replay counts %d duplicates + %d in doubt",
		stage, twice, confirmed, rep.Duplicates, rep.InDoubt)
	if confirmed != rep.Duplicates || twice > rep.Duplicates+rep.InDoubt {
		t.Errorf("%s: the broker holds %d message(s) twice, %d of them with confirmed copies; the replay counts %d duplicates and %d in doubt: want the duplicates exact and the rest in doubt",
			stage, twice, confirmed, rep.Duplicates, rep.InDoubt)
	}
}

// expectMarkedExtras checks the consumer's deliveries (after account):
// each carries the replay's id, and a message delivered more than once was
// delivered at most once without engine.PossibleDuplicateHeader, always
// with one x-dlqbot-copy.
func (f *faultRun) expectMarkedExtras(t *testing.T, replayID string) {
	t.Helper()
	plain := map[string]int{}
	copies := map[string]map[string]bool{}
	got := f.rec.got()
	for _, d := range got {
		if d.Headers["x-replay-id"] != replayID {
			t.Errorf("%s delivered with x-replay-id %v, want %s", d.MessageId, d.Headers["x-replay-id"], replayID)
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
	for mid, k := range ids(got) {
		if k < 2 {
			continue
		}
		if plain[mid] > 1 {
			t.Errorf("%s delivered %d times, %d of them without %s", mid, k, plain[mid], engine.PossibleDuplicateHeader)
		}
		if len(copies[mid]) != 1 {
			t.Errorf("%s delivered %d times with %d different x-dlqbot-copy values", mid, k, len(copies[mid]))
		}
	}
}
