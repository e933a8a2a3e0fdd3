package replay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	broker "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// fixedClock always tells the same time; its waits are the wall clock's.
type fixedClock struct {
	engine.SystemClock
	t time.Time
}

func (c fixedClock) Now() time.Time { return c.t }

// nsbFailure is an NServiceBus dead letter from source that failed at
// `at` with exc.
func nsbFailure(i int, source, exc string, at time.Time) amqp.Publishing {
	return amqp.Publishing{MessageId: fmt.Sprintf("m-%s-%d", source, i), Body: []byte(fmt.Sprintf(`{"n":%d}`, i)), Headers: amqp.Table{
		"NServiceBus.FailedQ": source, "NServiceBus.TimeOfFailure": at,
		"NServiceBus.ExceptionInfo.ExceptionType": "Orders.OrderException", "NServiceBus.ExceptionInfo.Message": exc,
	}}
}

// springFailure is a Spring AMQP dead letter: no failure time.
func springFailure(i int, source string) amqp.Publishing {
	return amqp.Publishing{MessageId: fmt.Sprintf("s-%d", i), Body: []byte("spring"), Headers: amqp.Table{
		"x-original-exchange": "", "x-original-routingKey": source, "x-exception-message": fmt.Sprintf("timeout after %dms", 100+i),
	}}
}

// TestPreviewArrivalsAndGroupSelection previews a DLQ fed by a burst two
// hours ago, a failure group still arriving, Spring messages without a
// failure time and copies that came back from a replay; then previews one
// group with group=<id> and the returned copies with replayed_by=, checking
// each against the DLQ's own contents, which stay unchanged.
func TestPreviewArrivalsAndGroupSelection(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, b testkit.Broker) {
		for _, quorum := range []bool{false, true} {
			t.Run(fmt.Sprintf("quorum=%v", quorum), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				r := b.Dial(t)
				var args amqp.Table
				if quorum {
					args = testkit.Quorum(nil)
				}
				dlq := r.Queue(testkit.Name("arr.dlq"), args)
				now := time.Now().UTC().Truncate(time.Second)
				var msgs []amqp.Publishing
				for i := 0; i < 30; i++ { // the deploy's burst
					msgs = append(msgs, nsbFailure(i, "orders", fmt.Sprintf("order %d not found", 4000+i), now.Add(-2*time.Hour+time.Duration(i)*10*time.Second)))
				}
				for i := 0; i < 6; i++ { // still arriving
					msgs = append(msgs, nsbFailure(i, "payments", "currency XTS not supported", now.Add(-30*time.Minute+time.Duration(i)*5*time.Minute+time.Second)))
				}
				for i := 0; i < 4; i++ {
					msgs = append(msgs, springFailure(i, "orders"))
				}
				for i := 0; i < 3; i++ { // came back from replay r_arrivals01 (a new exception, its id)
					m := nsbFailure(100+i, "orders", "order 1 not found", now.Add(-time.Hour))
					m.Headers["x-replay-id"], m.Headers["x-replay-count"] = "r_arrivals01", int32(1)
					msgs = append(msgs, m)
				}
				r.Publish(dlq, msgs...)
				r.WaitCount(dlq, len(msgs), 20*time.Second)

				bk, err := broker.New(broker.Config{URL: b.AMQPURL, ManagementURL: b.ManagementURL})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = bk.Close() })
				rdb, prefix := testkit.Redis(t)
				st, err := store.New(store.Config{Prefix: prefix}, rdb, engine.SystemClock{})
				if err != nil {
					t.Fatal(err)
				}
				svc, err := replay.New(replay.Config{}, replay.Deps{Broker: bk, Mover: bk, Tokens: st.Tokens(), Ledger: st.Ledger(),
					Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(), Clock: fixedClock{t: now}, Counters: testkit.CountersOff{}, Consumers: testkit.ConsumersOff{}, Watches: testkit.WatchesOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, Claims: testkit.ClaimsOff{}, TapGaps: testkit.TapOff{}})
				if err != nil {
					t.Fatal(err)
				}

				p, err := svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U_TEST")
				if err != nil {
					t.Fatal(err)
				}
				a := p.Arrivals
				if a == nil {
					t.Fatal("no arrivals")
				}
				if a.Messages != len(msgs) || a.Undated != 4 {
					t.Fatalf("arrivals of %d messages, %d undated; want %d and 4", a.Messages, a.Undated, len(msgs))
				}
				drawn := 0
				for _, c := range a.Counts {
					drawn += c
				}
				if drawn != len(msgs)-4 || a.Bucket != 5*time.Minute || len(a.Counts) > engine.ArrivalBuckets {
					t.Fatalf("%d drawn in %d buckets of %v", drawn, len(a.Counts), a.Bucket)
				}
				// The XTS failures: the last at now-4m59s is recent, the one before (-9m59s) is not.
				if a.Recent != 1 || !a.First.Equal(now.Add(-2*time.Hour)) || !a.Last.Equal(now.Add(-5*time.Minute+time.Second)) {
					t.Fatalf("recent %d first %v last %v (now %v)", a.Recent, a.First, a.Last, now)
				}
				byKey := map[string]engine.ArrivalRow{}
				for _, g := range a.Groups {
					byKey[g.Key] = g
				}
				notFound, xts := byKey["Orders.OrderException: order <n> not found"], byKey["Orders.OrderException: currency XTS not supported"]
				if notFound.Messages != 33 || xts.Messages != 6 || !xts.StillArriving() || notFound.StillArriving() || len(a.Groups) != 3 {
					t.Fatalf("groups %+v", a.Groups)
				}

				// group=<id> previews exactly that group: the six XTS failures.
				gp, err := svc.Preview(ctx, engine.Selection{DLQ: dlq, Group: xts.GroupID}, "U_TEST")
				if err != nil {
					t.Fatal(err)
				}
				if gp.Selected != 6 || gp.Arrivals.Messages != 6 || len(gp.Arrivals.Groups) != 1 || gp.Token == "" {
					t.Fatalf("group preview: %d selected, arrivals %+v", gp.Selected, gp.Arrivals)
				}
				for _, m := range gp.Messages {
					if m.FailureGroup != xts.Key || m.Source != "payments" {
						t.Fatalf("group preview holds %s (%s)", m.ID, m.FailureGroup)
					}
				}
				// replayed_by= previews the three copies that came back.
				rp, err := svc.Preview(ctx, engine.Selection{DLQ: dlq, ReplayedBy: "r_arrivals01"}, "U_TEST")
				if err != nil {
					t.Fatal(err)
				}
				if rp.Selected != 3 || rp.Distinct != 3 {
					t.Fatalf("returned copies: %d selected (%d distinct), want 3", rp.Selected, rp.Distinct)
				}
				// Nothing changed: every message is still in the DLQ.
				r.WaitCount(dlq, len(msgs), 20*time.Second)
				if got := len(r.Drain(dlq, len(msgs), 3*time.Second)); got != len(msgs) {
					t.Fatalf("DLQ holds %d after the previews, want %d", got, len(msgs))
				}
			})
		}
	})
}
