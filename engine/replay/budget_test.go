package replay_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// twoAtATime replays in steps of 2, unpaced: many steps, each a read.
var twoAtATime = engine.Params{Step: 2, Cap: 2, Rate: -1, Timeout: 20 * time.Second}

// TestReplayNeverDropsOnQuorumDLQ replays quorum DLQs in many small steps,
// each of which reads the DLQ: with a small explicit limit, and with none
// set (RabbitMQ 4.0 applies 20; 3.10 has none). Nothing may be lost, and
// the replay either finishes exactly or stops by the read budget.
func TestReplayNeverDropsOnQuorumDLQ(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		args  amqp.Table
		total int
	}{
		{"limit-5", amqp.Table{"x-delivery-limit": 5}, 12},
		{"no-limit-set", nil, 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
				t.Parallel()
				e := newEnvOn(t, fast, on)
				r := e.rabbit
				src, dlq := testkit.Name("src"), testkit.Name("dlq")
				r.Topology(src, dlq, testkit.Quorum(tc.args))
				r.Reject(src, testkit.Msgs(tc.total, 100)...)
				r.WaitCount(dlq, tc.total, 20*time.Second)
				p := preview(t, e, engine.Selection{DLQ: dlq})
				rec := &recorder{}
				r.Consume(src, rec.handle)
				rep := approveRun(t, e, p.Token, twoAtATime, false)
				t.Logf("%s: %s: %s", on.Name, rep.State, rep.Note)

				switch rep.State {
				case engine.StateFinished:
					if rep.Sent != tc.total || rep.Missing != 0 {
						t.Fatalf("finished with %d sent, %d missing; want %d sent, 0 missing", rep.Sent, rep.Missing, tc.total)
					}
				case engine.StateStopped:
					if !strings.Contains(rep.Note, "read budget") {
						t.Fatalf("stopped, but not by the read budget: %s", rep.Note)
					}
				default:
					t.Fatalf("replay %s: %s", rep.State, rep.Note)
				}
				if rep.Missing != 0 {
					t.Fatalf("%d reported missing", rep.Missing)
				}
				noneLost(t, r, dlq, rec, tc.total, rep.Sent)
			})
		})
	}
}

// noneLost waits until the target's consumer got sent copies and checks
// that the DLQ holds the rest: nothing dropped.
func noneLost(t *testing.T, r *testkit.Rabbit, dlq string, rec *recorder, total, sent int) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, fmt.Sprintf("%d delivered to the target", sent), func() bool { return len(rec.got()) >= sent })
	testkit.Eventually(t, 30*time.Second, "the rest back in the DLQ", func() bool { return r.Count(dlq) == total-sent })
	if got := len(rec.got()); got != sent {
		t.Fatalf("target got %d, replay says %d sent", got, sent)
	}
	if n := r.Count(dlq); n+sent != total {
		t.Fatalf("DLQ %d + sent %d = %d, want %d: messages were dropped", n, sent, n+sent, total)
	}
}

// TestReadBudgetStopsAndResumesOnceRaised sets a small delivery limit by
// policy. On 4.3, which counts no give-back, the replay simply finishes.
// Before 4.3 the preview says how many reads a replay needs and how to raise
// the limit, the replay stops by the budget before a read could bring a
// message to its limit, a preview is then refused, and once the policy
// raises the limit the replay resumes and finishes exactly.
func TestReadBudgetStopsAndResumesOnceRaised(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		ctx := context.Background()
		// Without a cursor every step reads the DLQ to move and again to
		// look for returns, as the preview's budget counts: with one, the
		// replay reads it once and finds returns at its tail.
		cfg := fast
		cfg.Tune.CursorHold = -1
		e := newEnvOn(t, cfg, on)
		r := e.rabbit
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.Topology(src, dlq, testkit.Quorum(nil))
		policy := testkit.Name("limit")
		on.SetPolicy(t, policy, "^"+dlq+"$", map[string]any{"delivery-limit": 6})
		waitLimit(t, e, dlq, 6)

		const total = 16
		msgs := testkit.Msgs(total, 100)
		r.Reject(src, msgs...)
		r.WaitCount(dlq, total, 20*time.Second)

		p := preview(t, e, engine.Selection{DLQ: dlq})
		if !on.RequeueCounts() {
			// 4.3 counts no give-back: no budget, and the replay's eight
			// steps (17 reads of a DLQ whose limit is 6) finish exactly.
			if p.Budget != nil {
				t.Fatalf("preview on 4.3 shows a read budget: %+v", *p.Budget)
			}
			rec := &recorder{}
			r.Consume(src, rec.handle)
			rep := approveRun(t, e, p.Token, twoAtATime, false)
			if rep.State != engine.StateFinished || rep.Sent != total || rep.Missing != 0 || rep.Failed != 0 {
				t.Fatalf("replay on 4.3 %s, %d sent, %d missing: %s; want finished with %d sent", rep.State, rep.Sent, rep.Missing, rep.Note, total)
			}
			noneLost(t, r, dlq, rec, total, total)
			return
		}
		b := p.Budget
		if b == nil {
			t.Fatalf("preview has no read budget: %+v", p.DLQ)
		}
		// After the preview's own read: 6 − 1 (reserve) − 1 = 4 reads left;
		// 16 messages at the default steps (10, 20) take 2 steps: 1 + 2×2 = 5.
		if b.Limit != 6 || b.LimitFrom != "policy" || b.DeliveryCount != 1 || b.ReadsLeft != 4 || b.ReadsNeeded != 5 || b.Steps != 2 {
			t.Fatalf("budget %+v, want limit 6 from policy, count 1, 4 reads left, 5 needed in 2 steps", *b)
		}
		if want := "rabbitmqctl set_policy -p / --priority 10 --apply-to queues " + policy + " '^" + dlq + "$' '{\"delivery-limit\":20}'"; b.Raise != want {
			t.Fatalf("raise:\n got  %s\n want %s", b.Raise, want)
		}
		var detail string
		for _, pr := range p.Problems {
			if pr.Kind == engine.ProblemDeliveryLimit {
				detail = pr.Detail
			}
		}
		for _, w := range []string{"needs 5 reads", "leaves 4", "would stop", b.Raise} {
			if !strings.Contains(detail, w) {
				t.Fatalf("the preview's budget line lacks %q:\n%s", w, detail)
			}
		}
		t.Logf("preview: %s", detail)

		rec := &recorder{}
		r.Consume(src, rec.handle)
		ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", twoAtATime, false)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner-1")
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		// The preview counted the approval's check and a read per step; the
		// approval's proof (when the broker's counts allow it) and the
		// cursor (steps continue one read) spend less, so the replay gets
		// at least one step of 2 before the budget stops it, never all.
		if rep.State != engine.StateStopped || !strings.Contains(rep.Note, "read budget") || rep.Sent < 2 || rep.Sent >= total || rep.Missing != 0 {
			t.Fatalf("replay %s, %d sent, %d missing: %s; want stopped by the read budget after a step or more", rep.State, rep.Sent, rep.Missing, rep.Note)
		}
		t.Logf("stopped: %s", rep.Note)
		noneLost(t, r, dlq, rec, total, rep.Sent)

		// What is left of the budget (at most one read) a preview may
		// take; then a preview is refused and reads nothing.
		for i := 0; ; i++ {
			_, err = e.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U_REQ")
			if errors.Is(err, engine.ErrReadBudget) {
				if !strings.Contains(err.Error(), "nothing was read") {
					t.Fatalf("preview with the budget spent: %v, want 'nothing was read'", err)
				}
				break
			}
			if err != nil || i >= 1 {
				t.Fatalf("preview %d after the stop: %v, want a refusal by the read budget by the second", i+1, err)
			}
		}
		// check reads this DLQ too (dead letters reach it through the default
		// exchange, so no tap can see them): refused the same way.
		if _, err := e.svc.Check(ctx, rep.ID, ""); !errors.Is(err, engine.ErrReadBudget) {
			t.Fatalf("check with the budget spent: %v, want a refusal by the read budget", err)
		}
		if n := r.Count(dlq); n != total-rep.Sent {
			t.Fatalf("DLQ holds %d after the refused preview and check, want %d", n, total-rep.Sent)
		}

		on.SetPolicy(t, policy, "^"+dlq+"$", map[string]any{"delivery-limit": 100})
		waitLimit(t, e, dlq, 100)
		if _, err := e.svc.Control(ctx, rep.ID, engine.ControlResume, "U_RES"); err != nil {
			t.Fatal(err)
		}
		rep, err = e.svc.Run(ctx, rep.ID, "owner-2")
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if rep.State != engine.StateFinished || rep.Sent != total || rep.Missing != 0 || rep.Failed != 0 {
			t.Fatalf("resumed replay %s, %d sent, %d missing: %s; want finished with %d sent", rep.State, rep.Sent, rep.Missing, rep.Note, total)
		}
		testkit.Eventually(t, 20*time.Second, "all delivered", func() bool { return len(rec.got()) == total })
		want := map[string]int{}
		for _, m := range msgs {
			want[m.MessageId]++
		}
		got := ids(rec.got())
		for id, n := range want {
			if got[id] != n {
				t.Fatalf("target got %v, want each of %d once", got, total)
			}
		}
		if n := r.Count(dlq); n != 0 {
			t.Fatalf("DLQ keeps %d", n)
		}
	})
}

// waitLimit polls until dlq's effective delivery limit is limit.
func waitLimit(t *testing.T, e *env, dlq string, limit int) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("delivery limit %d", limit), func() bool {
		st, err := e.broker.Inspect(context.Background(), dlq)
		return err == nil && st.DeliveryLimit == limit
	})
}

// TestPreviewTenTimesThenReplay previews a quorum DLQ with
// x-delivery-limit=2 ten times and then replays it in steps of two (each
// step reads the DLQ twice). RabbitMQ 4.3 does not count a give-back with
// nack(requeue): every preview reads, none shows a budget, and the replay
// finishes with every id at the target's consumer once and the DLQ empty;
// the copies carry neither x-delivery-count nor x-acquired-count. Before
// 4.3 (3.10, 4.0) every give-back counts: the first preview leaves one
// give-back in reserve, the other nine are refused by the read budget
// before reading, and the replay stops by the budget with nothing dropped;
// two more reads by a plain client then make the broker drop them all.
func TestPreviewTenTimesThenReplay(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		ctx := context.Background()
		e := newEnvOn(t, fast, on)
		r := e.rabbit
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.Topology(src, dlq, testkit.Quorum(amqp.Table{"x-delivery-limit": 2}))
		const total = 12
		msgs := testkit.Msgs(total, 100)
		r.Reject(src, msgs...)
		r.WaitCount(dlq, total, 20*time.Second)

		var first *engine.Preview
		read, refused := 0, 0
		for i := range 10 {
			p, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U_REQ")
			switch {
			case err == nil:
				read++
				if first == nil {
					first = p
				}
				if on.RequeueCounts() != (p.Budget != nil) {
					t.Fatalf("preview %d on %s: budget %+v; want one exactly when give-backs count", i+1, on.Series, p.Budget)
				}
				if p.Selected != total {
					t.Fatalf("preview %d selected %d messages, want %d", i+1, p.Selected, total)
				}
			case errors.Is(err, engine.ErrReadBudget) && strings.Contains(err.Error(), "nothing was read"):
				refused++
			default:
				t.Fatalf("preview %d: %v", i+1, err)
			}
			// Each read's give-backs land in the queue before the next.
			testkit.Eventually(t, 20*time.Second, "the DLQ whole again", func() bool { return r.Count(dlq) == total })
		}
		if wantRead := map[bool]int{true: 1, false: 10}[on.RequeueCounts()]; read != wantRead || read+refused != 10 {
			t.Fatalf("%d previews read, %d refused on %s; want %d read", read, refused, on.Series, wantRead)
		}

		rec := &recorder{}
		r.Consume(src, rec.handle)
		rep := engine.Replay{State: engine.StateStopped}
		ap, err := replay.Approve(e.svc, ctx, first.Token, "U_APP", twoAtATime, false)
		switch {
		case err == nil:
			rep, err = e.svc.Run(ctx, ap.Replay.ID, "owner-"+t.Name())
			if err != nil {
				t.Fatalf("run: %v", err)
			}
		case errors.Is(err, engine.ErrReadBudget) && on.RequeueCounts():
			rep.Note = "read budget: " + err.Error() // refused at approval: nothing sent
		default:
			t.Fatalf("approve on %s: %v", on.Series, err)
		}
		t.Logf("%s: %s, %d sent: %s", on.Name, rep.State, rep.Sent, rep.Note)

		if on.RequeueCounts() {
			if rep.State != engine.StateStopped || !strings.Contains(rep.Note, "read budget") || rep.Missing != 0 {
				t.Fatalf("replay on %s: %s, %d missing: %s; want stopped by the read budget", on.Series, rep.State, rep.Missing, rep.Note)
			}
			noneLost(t, r, dlq, rec, total, rep.Sent)
			// The control: two more give-backs by a plain reader take the
			// count past the limit, and the broker drops the messages: the
			// budget's refusals were needed.
			left := total - rep.Sent
			if c := giveBack(t, r, dlq, left); c != 1 {
				t.Fatalf("after one read the messages carry delivery count %d, want 1", c)
			}
			testkit.Eventually(t, 20*time.Second, "the give-back to land", func() bool { return r.Count(dlq) == left })
			if c := giveBack(t, r, dlq, left); c != 2 {
				t.Fatalf("after two reads the messages carry delivery count %d, want 2 (the limit)", c)
			}
			testkit.Eventually(t, 20*time.Second, "the broker dropping them past the limit", func() bool { return r.Count(dlq) == 0 })
			if got := r.Drain(dlq, 1, 3*time.Second); len(got) != 0 {
				t.Fatalf("%s still holds messages past their limit of 2", dlq)
			}
			return
		}
		if rep.State != engine.StateFinished || rep.Sent != total || rep.Missing != 0 || rep.Failed != 0 || strings.Contains(rep.Note, "budget") {
			t.Fatalf("replay on 4.3: %s, %d sent, %d missing, %d failed: %s; want finished, all %d sent", rep.State, rep.Sent, rep.Missing, rep.Failed, rep.Note, total)
		}
		testkit.Eventually(t, 20*time.Second, "every copy at the consumer", func() bool { return len(rec.got()) >= total })
		got := ids(rec.got())
		for _, m := range msgs {
			if got[m.MessageId] != 1 {
				t.Fatalf("the consumer got %v, want each of the %d ids once", got, total)
			}
		}
		for _, d := range rec.got() {
			for _, h := range []string{"x-delivery-count", "x-acquired-count", "x-death"} {
				if _, ok := d.Headers[h]; ok {
					t.Fatalf("copy %s carries %s=%v", d.MessageId, h, d.Headers[h])
				}
			}
		}
		testkit.Eventually(t, 20*time.Second, "the DLQ empty", func() bool { return r.Count(dlq) == 0 })
		if len(rec.got()) != total {
			t.Fatalf("the consumer got %d copies, want %d", len(rec.got()), total)
		}
	})
}

// giveBack consumes the n messages of q and gives them back with
// Nack(multiple, requeue) after cancelling its consumer, as dlqbot does;
// it returns the highest
// x-delivery-count they were delivered with.
func giveBack(t *testing.T, r *testkit.Rabbit, q string, n int) int {
	t.Helper()
	ch := r.Channel()
	defer ch.Close()
	if err := ch.Qos(n, 0, false); err != nil {
		t.Fatal(err)
	}
	tag := testkit.Name("giveback")
	ds, err := ch.Consume(q, tag, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	top := 0
	for range n {
		select {
		case d := <-ds:
			if c, ok := d.Headers["x-delivery-count"].(int64); ok {
				top = max(top, int(c))
			}
		case <-deadline:
			t.Fatalf("%s: fewer than %d deliveries", q, n)
		}
	}
	// Cancel first: a consumer still there would get the messages again
	// at once, and the channel's close would give them back a second time.
	if err := ch.Cancel(tag, false); err != nil {
		t.Fatal(err)
	}
	if err := ch.Nack(0, true, true); err != nil {
		t.Fatal(err)
	}
	return top
}

// TestBudgetUnknownRefusesAndChangesNothing: while the management API
// answers 503, the read budget of a quorum DLQ cannot be told: a preview
// and an approval are refused before reading, saying so, and nothing is
// sent or changed (the token stays usable). Once the API answers again the
// same token's replay finishes with every message sent once.
func TestBudgetUnknownRefusesAndChangesNothing(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		ctx := context.Background()
		target, err := url.Parse(on.ManagementURL)
		if err != nil {
			t.Fatal(err)
		}
		target.User = nil
		proxy := httputil.NewSingleHostReverseProxy(target)
		var down atomic.Bool
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if down.Load() {
				http.Error(w, "management down for the test", http.StatusServiceUnavailable)
				return
			}
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		behind := on
		behind.ManagementURL = "http://guest:guest@" + srv.Listener.Addr().String()
		e := newEnvOn(t, fast, behind)
		r := e.rabbit
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.Topology(src, dlq, testkit.Quorum(amqp.Table{"x-delivery-limit": 50}))
		const total = 10
		msgs := testkit.Msgs(total, 100)
		r.Reject(src, msgs...)
		r.WaitCount(dlq, total, 20*time.Second)
		p := preview(t, e, engine.Selection{DLQ: dlq})
		rec := &recorder{}
		r.Consume(src, rec.handle)

		down.Store(true)
		testkit.Eventually(t, 20*time.Second, "the broker's answers to expire", func() bool {
			st, err := e.broker.Inspect(ctx, dlq)
			return err == nil && st.Type == ""
		})
		want := "cannot tell the delivery limit of " + dlq + ": management API unreachable"
		if _, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U_REQ"); !errors.Is(err, engine.ErrBudgetUnknown) || !strings.Contains(err.Error(), want) {
			t.Fatalf("preview without the management API: %v, want %q", err, want)
		}
		if _, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", oneStep, false); !errors.Is(err, engine.ErrBudgetUnknown) || !strings.Contains(err.Error(), want) {
			t.Fatalf("approval without the management API: %v, want %q", err, want)
		}
		if n := r.Count(dlq); n != total || len(rec.got()) != 0 {
			t.Fatalf("after the refusals the DLQ holds %d and the source got %d; want %d and 0", n, len(rec.got()), total)
		}

		down.Store(false)
		rep := approveRun(t, e, p.Token, oneStep, false)
		if rep.State != engine.StateFinished || rep.Sent != total || rep.Missing != 0 {
			t.Fatalf("replay once the API answers: %s, %d sent: %s; want finished with %d", rep.State, rep.Sent, rep.Note, total)
		}
		noneLost(t, r, dlq, rec, total, total)
		got := ids(rec.got())
		for _, m := range msgs {
			if got[m.MessageId] != 1 {
				t.Fatalf("the source got %v, want each of %d once", got, total)
			}
		}
	})
}
