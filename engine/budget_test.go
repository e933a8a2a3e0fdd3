package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// twoAtATime replays in steps of 2, unpaced: many steps, each a read.
var twoAtATime = engine.Params{Step: 2, Cap: 2, Rate: -1, Timeout: 20 * time.Second}

// TestReplayNeverDropsOnQuorumDLQ replays quorum DLQs in many small steps,
// each of which reads the DLQ: with a small explicit limit, and with none
// set (RabbitMQ 4.0 applies 20; 3.10 has none). Nothing may be lost, and
// the replay either finishes exactly or stops by the read budget.
func TestReplayNeverDropsOnQuorumDLQ(t *testing.T) {
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
// policy: the preview says how many reads a replay needs and how to raise
// the limit, the replay stops by the budget before a read could bring a
// message to its limit, a preview is then refused, and once the policy
// raises the limit the replay resumes and finishes exactly.
func TestReadBudgetStopsAndResumesOnceRaised(t *testing.T) {
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		ctx := context.Background()
		e := newEnvOn(t, fast, on)
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
		ap, err := e.svc.Approve(ctx, p.Token, "U_APP", twoAtATime, false)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner-1")
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		// Compare (count 2), step 1 (move 3, look 4): then 6−1−4 = 1 < 2.
		if rep.State != engine.StateStopped || !strings.Contains(rep.Note, "read budget") || rep.Sent != 2 || rep.Missing != 0 {
			t.Fatalf("replay %s, %d sent, %d missing: %s; want stopped by the read budget after 2", rep.State, rep.Sent, rep.Missing, rep.Note)
		}
		t.Logf("stopped: %s", rep.Note)
		noneLost(t, r, dlq, rec, total, rep.Sent)

		// One read is left (count 4 of 6): a preview may take it, the next
		// is refused.
		p2 := preview(t, e, engine.Selection{DLQ: dlq})
		if p2.Budget == nil || p2.Budget.ReadsLeft != 0 || p2.Budget.DeliveryCount != 5 {
			t.Fatalf("preview after the stop: budget %+v, want count 5 and no read left", p2.Budget)
		}
		_, err = e.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U_REQ")
		if !errors.Is(err, engine.ErrReadBudget) || !strings.Contains(err.Error(), "nothing was read") {
			t.Fatalf("preview with the budget spent: %v, want a refusal by the read budget", err)
		}
		// check reads this DLQ too (dead letters reach it through the default
		// exchange, so no tap can see them): refused the same way.
		if _, err := e.svc.Check(ctx, rep.ID, ""); !errors.Is(err, engine.ErrReadBudget) {
			t.Fatalf("check with the budget spent: %v, want a refusal by the read budget", err)
		}
		if n := r.Count(dlq); n != total-2 {
			t.Fatalf("DLQ holds %d after the refused preview and check, want %d", n, total-2)
		}

		on.SetPolicy(t, policy, "^"+dlq+"$", map[string]any{"delivery-limit": 100})
		waitLimit(t, e, dlq, 100)
		if _, err := e.svc.Resume(ctx, rep.ID, "U_RES"); err != nil {
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
