package replay_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rs/zerolog"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// These tests hold "finished" after a resume to the broker's state. An
// unpaced replay loses its connection mid-way; the resume (resend=in-doubt
// when the ledger holds copies in doubt) must end finished, and then:
//
//   - the DLQ, counted by the test, holds none of the replayed selection;
//   - every message id reached the consumer at least once;
//   - the originals of confirmed copies the DLQ held at the resume (the
//     acks the lost connection did not carry) were acked without a copy:
//     the resume's DuplicatesAcked grows by exactly their number, counted
//     by the test as what the DLQ held beyond the originals that must be
//     there (those never sent and those whose copy is in doubt);
//   - the ids the consumer received twice are exactly the copies in doubt
//     that had reached it before the resume (resume_acks.go and resend.go:
//     a copy in doubt is sent again, marked, with its x-dlqbot-copy; an
//     original of a confirmed copy is never sent again), each of them
//     resent (Resent grows by the copies in doubt), and Duplicates ends 0.
//
// With a second replay of another part of the same DLQ running through
// the resume, that replay finishes too with each of its ids delivered
// once: the first replay's acks touch none of its selection.

// lossRun is a faultRun whose DLQ may hold a second part (ids "o-<i>",
// dead-lettered from other) beside the n originals of the selection.
type lossRun struct {
	*faultRun
	other  string   // the second part's source queue ("" when none)
	others []string // its message ids
}

// newLossRun fills a DLQ with dlqArgs on on with n dead letters of the
// selection ("m-<i>", from f.src) and m of another source, previews the
// selection (its source) with a fault engine and starts the selection's
// recorder. big fills by publishing dead letters as the broker makes
// them (testkit.DeadLettersInto), which 100,000 needs.
func newLossRun(t *testing.T, on testkit.Broker, dlqArgs amqp.Table, n, m int, big bool) *lossRun {
	t.Helper()
	cfg := fast
	if big {
		cfg.LeaseTTL = 15 * time.Second
	}
	if m > 0 {
		cfg.Log = zerolog.New(testLog(t)).Level(zerolog.InfoLevel) // what each replay gave way to, and waited for
	}
	e, conn := newFaultEnv(t, on, false, cfg)
	r := e.rabbit
	var src, dlq string
	if big {
		src, dlq = testkit.Name("src"), testkit.Name("dlq")
		r.Queue(dlq, dlqArgs)
		r.Queue(src, nil)
		r.DeadLettersInto(dlq, src, n, 200)
	} else {
		src, dlq = r.DeadLetteredAs(dlqArgs, n, 200)
	}
	lr := &lossRun{faultRun: &faultRun{e: e, on: on, conn: conn, src: src, dlq: dlq, rec: &recorder{}}}
	if m > 0 {
		lr.other = testkit.Name("other")
		r.Queue(lr.other, nil)
		died := time.Now().Add(-time.Minute).Truncate(time.Second)
		msgs := make([]amqp.Publishing, m)
		for i := range msgs {
			id := fmt.Sprintf("o-%d", i)
			lr.others = append(lr.others, id)
			msgs[i] = testkit.Msg(id, testkit.Body(i, 200), testkit.DeathHeaders(lr.other, died))
		}
		r.Publish(dlq, msgs...)
		r.WaitCount(dlq, n+m, time.Minute)
	}
	lr.p = preview(t, e, engine.Selection{DLQ: dlq, Source: src})
	if lr.p.Selected != n {
		t.Fatalf("the preview of %s's part selected %d, want %d", src, lr.p.Selected, n)
	}
	testkit.Eventually(t, 20*time.Second, "the engine's connection in the management API", func() bool {
		return on.CountConnections(t, conn) > 0
	})
	for i := range n {
		lr.originals = append(lr.originals, fmt.Sprintf("m-%d", i))
	}
	r.Consume(src, lr.rec.handle)
	return lr
}

// loseConnection approves the selection as one step and cuts the
// engine's connection once share more copies arrived, up to three times
// (resuming plainly between cuts) until a loss leaves an original of a
// confirmed copy behind; it returns the replay as the last cut left it.
// The step is unpaced: a paced one goes on through a new connection
// (reconnect.go) and needs no resume.
func (lr *lossRun) loseConnection(t *testing.T, share int, wait time.Duration) engine.Replay {
	t.Helper()
	e, ctx, n := lr.e, context.Background(), len(lr.originals)
	ap, err := replay.Approve(e.svc, ctx, lr.p.Token, "U_APP", engine.Params{Step: n, Cap: n, Rate: -1, Timeout: 30 * time.Second}, true)
	if err != nil {
		t.Fatal(err)
	}
	id := ap.Replay.ID
	var rep engine.Replay
	for loss := 1; ; loss++ {
		if loss > 1 {
			if _, err := e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER"); err != nil {
				t.Fatal(err)
			}
		}
		names := lr.connNames(t)
		before := len(lr.rec.got())
		done := make(chan engine.Replay, 1)
		go func() { rep, _ := e.svc.Run(ctx, id, "owner-"+strconv.Itoa(loss)); done <- rep }()
		testkit.Eventually(t, wait, "copies delivered before the fault", func() bool { return len(lr.rec.got()) >= before+share })
		testkit.Eventually(t, 30*time.Second, "the engine's connection closed", func() bool { return lr.cut(t, names) > 0 })
		select {
		case rep = <-done:
		case <-time.After(wait):
			t.Fatalf("the replay did not end within %s of its connection closing", wait)
		}
		if rep.State == engine.StateFinished {
			t.Fatalf("loss %d came too late: the replay finished (sent %d of %d, the consumer had %d): %s", loss, rep.Sent, n, len(lr.rec.got()), rep.Note)
		}
		lr.expectStoppedByFault(t, rep)
		t.Logf("after loss %d: sent %d, duplicates %d, in doubt %d: %s", loss, rep.Sent, rep.Duplicates, rep.InDoubt, rep.Note)
		if rep.Duplicates > 0 || loss == 3 || rep.Sent > n/2 {
			return rep
		}
	}
}

// atResume is what the test finds before the last resume: the broker
// quiet, the ledger's confirmed and in-doubt copies, the copies in doubt
// that reached the consumer, and the originals of confirmed copies the DLQ
// holds (the acks the resume owes).
type atResume struct {
	confirmed, inDoubt int
	inDoubtCopies      map[string]bool // x-dlqbot-copy of each copy in doubt
	arrivedInDoubt     int             // ids whose copy in doubt reached the consumer
	owed               int             // originals of confirmed copies in the DLQ
	rep                engine.Replay
}

// snapshot waits until the target is drained and the DLQ quiet (no reader,
// nothing unacked, every original that must be there back), then counts
// atResume from the ledger, the consumer and the DLQ's own count.
func (lr *lossRun) snapshot(t *testing.T, id string, wait time.Duration) atResume {
	t.Helper()
	ctx, r, n := context.Background(), lr.e.rabbit, len(lr.originals)
	entries, err := lr.e.store.Ledger().Entries(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	a := atResume{inDoubtCopies: map[string]bool{}}
	for _, en := range entries {
		if !en.Pending {
			a.confirmed++
			continue
		}
		if en.Copy == "" {
			t.Fatalf("a copy in doubt without its x-dlqbot-copy in the ledger: %+v", en)
		}
		a.inDoubt++
		a.inDoubtCopies[en.Copy] = true
	}
	// Never sent, or in doubt: these originals are in the DLQ for sure;
	// the rest of what it holds of the selection are originals of
	// confirmed copies.
	must := n - a.confirmed + len(lr.others)
	since := time.Now()
	testkit.Eventually(t, wait, "the target drained, the DLQ quiet and holding every original not confirmed", func() bool {
		st, err := lr.e.broker.Counters(ctx, lr.dlq)
		return err == nil && st.SampledAt.After(since) && st.Unacked == 0 && st.Consumers == 0 &&
			r.Count(lr.src) == 0 && r.Count(lr.dlq) >= must
	})
	a.owed = r.Count(lr.dlq) - must
	seen := map[string]bool{}
	for _, d := range lr.rec.got() {
		if tag, _ := d.Headers["x-dlqbot-copy"].(string); a.inDoubtCopies[tag] && !seen[d.MessageId] {
			seen[d.MessageId] = true
			a.arrivedInDoubt++
		}
	}
	if a.rep, err = lr.e.svc.Status(ctx, id); err != nil {
		t.Fatal(err)
	}
	t.Logf("before the resume: %d confirmed, %d in doubt (%d of them delivered), the DLQ holds %d originals of confirmed copies; the replay counts %d duplicates, %d in doubt",
		a.confirmed, a.inDoubt, a.arrivedInDoubt, a.owed, a.rep.Duplicates, a.rep.InDoubt)
	return a
}

// resumeToEnd resumes replay id (resend=in-doubt when copies are in
// doubt) and runs it to its end within wait.
func (lr *lossRun) resumeToEnd(t *testing.T, id string, a atResume, wait time.Duration) engine.Replay {
	t.Helper()
	ctx := context.Background()
	action := engine.ControlResume
	if a.inDoubt > 0 {
		action = engine.ControlResumeResend
	}
	if _, err := lr.e.svc.Control(ctx, id, action, "U_RESUMER"); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	start := time.Now()
	rep, err := lr.e.svc.Run(rctx, id, "owner-last")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resumed (%s) in %s: %s, sent %d, resent %d, duplicates %d, acked %d: %s", action, time.Since(start).Round(time.Millisecond),
		rep.State, rep.Sent, rep.Resent, rep.Duplicates, rep.DuplicatesAcked, rep.Note)
	return rep
}

// expectFinishedClean checks the resumed replay rep against the broker:
// finished, the DLQ (once quiet) holding none of the selection, and the
// counts as the package comment above says.
func (lr *lossRun) expectFinishedClean(t *testing.T, a atResume, rep engine.Replay, wait time.Duration) {
	t.Helper()
	ctx, r, n := context.Background(), lr.e.rabbit, len(lr.originals)
	acked, resent := rep.DuplicatesAcked-a.rep.DuplicatesAcked, rep.Resent-a.rep.Resent
	if rep.State != engine.StateFinished || rep.Sent != n || rep.Duplicates != 0 || rep.Missing != 0 {
		t.Errorf("resumed: %s, %d of %d sent, %d duplicates left, %d missing: %s; want finished, every copy sent, none left", rep.State, rep.Sent, n, rep.Duplicates, rep.Missing, rep.Note)
	}
	if acked != a.owed || resent != a.inDoubt {
		t.Errorf("the resume acked %d original(s) of confirmed copies and resent %d; the DLQ held %d such originals and the ledger %d copies in doubt: want both exact",
			acked, resent, a.owed, a.inDoubt)
	}
	since := time.Now()
	testkit.Eventually(t, wait, "the target drained and the DLQ quiet", func() bool {
		st, err := lr.e.broker.Counters(ctx, lr.dlq)
		return err == nil && st.SampledAt.After(since) && st.Unacked == 0 && st.Consumers == 0 && r.Count(lr.src) == 0
	})
	left := map[string]int{}
	if k := r.Count(lr.dlq); k > 0 {
		left = ids(r.Drain(lr.dlq, k, 10*time.Second)) // the test's last look: nothing is put back
	}
	selLeft := 0
	for _, mid := range lr.originals {
		selLeft += left[mid]
	}
	if selLeft > 0 {
		t.Errorf("a finished replay left %d message(s) of its selection in the DLQ (of %d there)", selLeft, len(left))
	}
	lr.expectDeliveries(t, rep.ID, a)
}

// expectDeliveries checks the selection's consumer: every id at least
// once, and the ids received twice exactly the copies in doubt that had
// arrived before the resume, each with one marked resend of the same copy.
func (lr *lossRun) expectDeliveries(t *testing.T, id string, a atResume) {
	t.Helper()
	got := lr.rec.got()
	delivered := ids(got)
	tags := map[string]map[string]bool{}
	for _, d := range got {
		tag, _ := d.Headers["x-dlqbot-copy"].(string)
		if tags[d.MessageId] == nil {
			tags[d.MessageId] = map[string]bool{}
		}
		tags[d.MessageId][tag] = true
	}
	twice, never := 0, 0
	for _, mid := range lr.originals {
		switch c := delivered[mid]; {
		case c == 0:
			never++
		case c == 2:
			twice++
			for tag := range tags[mid] {
				if !a.inDoubtCopies[tag] {
					t.Errorf("%s delivered twice, as copy %s, which was not in doubt: a confirmed copy's original was sent again", mid, tag)
				}
			}
		case c > 2:
			t.Errorf("%s delivered %d times", mid, c)
		}
	}
	if never > 0 {
		t.Errorf("%d of %d ids never reached the consumer", never, len(lr.originals))
	}
	if len(delivered) > len(lr.originals) {
		t.Errorf("the consumer got %d distinct ids, the selection has %d", len(delivered), len(lr.originals))
	}
	t.Logf("the consumer received %d ids twice; %d copies in doubt had reached it before the resume", twice, a.arrivedInDoubt)
	if twice != a.arrivedInDoubt {
		t.Errorf("the consumer received %d ids twice, want exactly the %d copies in doubt that had reached it before the resume", twice, a.arrivedInDoubt)
	}
	lr.expectMarkedExtras(t, id)
}

// finishedAfterLoss is the whole case: n in the selection, m in the
// other part of the DLQ (replayed beside the resume when m > 0).
// With sideBySide, the resume must end before the other replay does.
func finishedAfterLoss(t *testing.T, on testkit.Broker, dlqArgs amqp.Table, n, m int, big, sideBySide bool) {
	wait := 2 * time.Minute
	if big {
		wait = 6 * time.Minute
	}
	lr := newLossRun(t, on, dlqArgs, n, m, big)
	start := time.Now()
	rep := lr.loseConnection(t, max(n/10, 200), wait)
	a := lr.snapshot(t, rep.ID, wait)
	var other <-chan engine.Replay
	var rec2 *recorder
	var otherBegan time.Time
	otherEnded := make(chan time.Time, 1)
	if m > 0 {
		// Paced to be under way when the resume begins; with sideBySide,
		// to outlast a resume that does not wait for it (1,000 at 25
		// msg/s: 40 s; 67 s under -race).
		rate := 100.0
		if sideBySide {
			rate = 25
			if raceOn {
				rate = 15
			}
		}
		otherBegan = time.Now()
		var ends <-chan engine.Replay
		ends, rec2 = lr.replayOtherPart(t, rate)
		// When the other replay ends, whether before or after the resume.
		fwd := make(chan engine.Replay, 1)
		go func() {
			r := <-ends
			otherEnded <- time.Now()
			fwd <- r
		}()
		other = fwd
	}
	atStart := 0
	if rec2 != nil {
		atStart = len(rec2.got())
	}
	resumed := time.Now()
	rep = lr.resumeToEnd(t, rep.ID, a, wait)
	resumeTook := time.Since(resumed)
	if rec2 != nil {
		// The other replay is paced to outlast the resume: its reads and
		// the resume's meet in the DLQ.
		k := len(rec2.got())
		t.Logf("the other replay had delivered %d of %d when the resume began, %d when it ended", atStart, m, k)
		if sideBySide && k >= m {
			t.Errorf("the resume ended only after the other replay had delivered all %d: it waited for that replay's read of the DLQ", k)
		}
	}
	if other != nil {
		lr.expectOtherPart(t, other, rec2, wait)
		end := <-otherEnded
		t.Logf("wall time: the resume %s (from %s after the other replay began), the other replay %s (ended %s after the resume began)",
			resumeTook.Round(100*time.Millisecond), resumed.Sub(otherBegan).Round(100*time.Millisecond),
			end.Sub(otherBegan).Round(100*time.Millisecond), end.Sub(resumed).Round(100*time.Millisecond))
	}
	lr.expectFinishedClean(t, a, rep, wait)
	t.Logf("%d + %d dead letters: loss, resume and checks in %s", n, m, time.Since(start).Round(time.Second))
}

// replayOtherPart previews and approves the DLQ's other part, at rate,
// and runs it on the same engine until its consumer has some of it; it
// returns the run's end and the consumer.
func (lr *lossRun) replayOtherPart(t *testing.T, rate float64) (<-chan engine.Replay, *recorder) {
	t.Helper()
	e, m := lr.e, len(lr.others)
	p := preview(t, e, engine.Selection{DLQ: lr.dlq, Source: lr.other})
	if p.Selected != m {
		t.Fatalf("the other part's preview selected %d, want %d", p.Selected, m)
	}
	rec := &recorder{}
	e.rabbit.Consume(lr.other, rec.handle)
	ap, err := replay.Approve(e.svc, context.Background(), p.Token, "U_APP2", engine.Params{Step: m, Cap: m, Rate: rate, Timeout: 30 * time.Second}, true)
	if err != nil {
		t.Fatal(err)
	}
	done := runAsync(t, e, ap.Replay.ID)
	testkit.Eventually(t, time.Minute, "the other replay under way", func() bool { return len(rec.got()) >= min(50, m) })
	return done, rec
}

// expectOtherPart checks the other part's replay: finished, each of its
// ids delivered once with its replay's id.
func (lr *lossRun) expectOtherPart(t *testing.T, done <-chan engine.Replay, rec *recorder, wait time.Duration) {
	t.Helper()
	var rep engine.Replay
	select {
	case rep = <-done:
	case <-time.After(wait):
		t.Fatalf("the other part's replay did not end within %s", wait)
	}
	m := len(lr.others)
	t.Logf("the other part's replay: %s, sent %d of %d, missing %d: %s", rep.State, rep.Sent, m, rep.Missing, rep.Note)
	if rep.State != engine.StateFinished || rep.Sent != m || rep.Missing != 0 {
		t.Errorf("the other part's replay %s, sent %d of %d, missing %d: %s; want finished with all sent", rep.State, rep.Sent, m, rep.Missing, rep.Note)
	}
	testkit.Eventually(t, wait, "the other part's consumer given every copy sent", func() bool { return len(rec.got()) >= rep.Sent })
	got := ids(rec.got())
	var wrong []string
	for _, mid := range lr.others {
		if got[mid] != 1 {
			wrong = append(wrong, fmt.Sprintf("%s×%d", mid, got[mid]))
		}
	}
	for _, d := range rec.got() {
		if d.Headers["x-replay-id"] != rep.ID {
			t.Errorf("%s reached the other part's target with x-replay-id %v, want %s", d.MessageId, d.Headers["x-replay-id"], rep.ID)
			break
		}
	}
	if len(wrong) > 0 {
		sort.Strings(wrong)
		t.Errorf("the other part's ids not delivered exactly once: %d, e.g. %v", len(wrong), wrong[:min(5, len(wrong))])
	}
}

// TestFinishedAfterAResumeLeavesNoneOfTheSelectionAndCountsItsDuplicates:
// 3,000 dead letters, on every broker, classic and quorum DLQs (100,000 in
// TestFinishedAfterAResumeOf100k). Unpaced, 1,000 could be sent whole
// before the management API closed the connection.
func TestFinishedAfterAResumeLeavesNoneOfTheSelectionAndCountsItsDuplicates(t *testing.T) {
	t.Parallel()
	eachDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		finishedAfterLoss(t, on, dlqArgs, 3000, 0, false, false)
	})
}

// TestFinishedAfterAResumeBesideAnotherReplayOfTheSameDLQ is the same with
// 1,000 more dead letters of another source in the DLQ, replayed by a
// second replay (at 100 msg/s) that is under way when the first resumes.
// The two replays' reads of the DLQ meet (neither has a tap: each finds
// returns by re-reading the DLQ while the other reads it, not at its
// cursor's tail, settle_tail.go): each gives way to the other's search
// (giveway.go), and neither calls the other "another client" nor waits
// for it the held-wait.
//
// The next test asks all of this and that the resume end first, so make
// test runs this one only with DLQBOT_CLASSIC_ALL=1 (make test-all), on
// every broker and kind: each case lasts as long as the paced replay
// beside it.
func TestFinishedAfterAResumeBesideAnotherReplayOfTheSameDLQ(t *testing.T) {
	t.Parallel()
	if !testkit.AllBrokers() {
		t.Skip("make test-all (DLQBOT_CLASSIC_ALL=1) runs it; TestAResumeEndsBeforeAnotherReplayOfTheSameDLQ asks the same and more")
	}
	eachDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		finishedAfterLoss(t, on, dlqArgs, 3000, 1000, false, false)
	})
}

// TestAResumeEndsBeforeAnotherReplayOfTheSameDLQ is the case above asking
// also that the resume (3,000 unpaced, about 12 s alone) end before the
// other replay (1,000 at 25 msg/s, 40 s; 15 msg/s under -race) does. The
// other replay's paced move passes over the resume's originals and holds
// them unacked for as long as it lasts; it gives them back as soon as the
// resume looks for them (giveway.go), so the resume does not wait for the
// other replay's step to end. Each of those give-backs spends a delivery
// attempt of a quorum DLQ's messages, and under load they outnumbered
// RabbitMQ 4.x's default limit of 20: the other replay's read budget
// (budget_test.go) then stopped it. A quorum DLQ here has a limit of 1,000
// where the broker sets one by default.
func TestAResumeEndsBeforeAnotherReplayOfTheSameDLQ(t *testing.T) {
	t.Parallel()
	eachDLQKindOnOne(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		if dlqArgs["x-queue-type"] == "quorum" && on.DefaultDeliveryLimit() > 0 {
			dlqArgs = testkit.Quorum(amqp.Table{"x-delivery-limit": 1000})
		}
		finishedAfterLoss(t, on, dlqArgs, 3000, 1000, false, true)
	})
}

// TestFinishedAfterAResumeOf100k is the same at 100,000, from a classic DLQ
// on the broker testkit.ClassicOn picks, with DLQBOT_100K_ALL=1 (make
// test-all; make test runs the 3,000 above on every broker and kind).
func TestFinishedAfterAResumeOf100k(t *testing.T) {
	t.Parallel()
	skipUnderRace(t)
	only100kAll(t, "TestFinishedAfterAResumeLeavesNoneOfTheSelectionAndCountsItsDuplicates at 3,000")
	testkit.EachBrokerIn(t, testkit.ClassicOn(t.Name()), func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		finishedAfterLoss(t, on, nil, whole, 0, true, false)
	})
}
