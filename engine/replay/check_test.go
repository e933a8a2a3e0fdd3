package replay_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// springLike consumes src like an application using Spring's republishing
// recoverer: messages whose order number is a multiple of 3 fail with an
// exception and are republished to dlq with the headers copied and
// x-exception-message added; numbers ≡ 1 (mod 5) are rejected (the broker
// dead-letters them); the rest are acked.
// publishPastTap publishes d to dlq through the default exchange, as a
// recoverer does with a failure: its headers copied, exception set, extra
// added (past the DLQ's bindings, so no tap sees it).
func publishPastTap(pub *amqp.Channel, dlq string, d amqp.Delivery, exception string, extra amqp.Table) error {
	h := amqp.Table{}
	for k, v := range d.Headers {
		h[k] = v
	}
	h["x-exception-message"] = exception
	for k, v := range extra {
		h[k] = v
	}
	return pub.PublishWithContext(context.Background(), "", dlq, false, false, amqp.Publishing{Headers: h, MessageId: d.MessageId, Body: d.Body})
}

func springLike(t *testing.T, r *testkit.Rabbit, src, dlq string) {
	pub := r.Channel()
	r.Consume(src, func(d amqp.Delivery) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(d.MessageId, "m-"))
		switch {
		case n%3 == 0:
			_ = publishPastTap(pub, dlq, d, fmt.Sprintf("order %d not found", 1000+n), amqp.Table{"x-original-exchange": "", "x-original-routingKey": src})
			return "ack"
		case n%5 == 1:
			return "reject"
		}
		return "ack"
	})
}

func TestCheckGroupsWhatCameBackAndCountsNewFailuresApart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	r := e.rabbit
	src, other, dlq := testkit.Name("src"), testkit.Name("other"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Queue(other, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	const n = 30
	r.Reject(src, testkit.Msgs(n, 100)...)
	r.WaitCount(dlq, n, 20*time.Second)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	springLike(t, r, src, dlq)
	rep := approveRun(t, e, p.Token, oneStep, false)
	if rep.Sent != n {
		t.Fatalf("sent %d, want %d", rep.Sent, n)
	}
	wantEx, wantRej := 0, 0
	for i := 0; i < n; i++ {
		switch {
		case i%3 == 0:
			wantEx++
		case i%5 == 1:
			wantRej++
		}
	}
	// Failures unrelated to the replay arrive meanwhile.
	r.Reject(other, testkit.Msg("new-0", []byte("x"), nil), testkit.Msg("new-1", []byte("y"), nil))
	r.WaitCount(dlq, wantEx+wantRej+2, 20*time.Second)

	c, err := e.svc.Check(context.Background(), rep.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Replayed != n || c.Returned != wantEx+wantRej || c.NewFailures != 2 {
		t.Fatalf("check: replayed %d returned %d new %d, want %d %d 2", c.Replayed, c.Returned, c.NewFailures, n, wantEx+wantRej)
	}
	got := map[string]int{}
	for _, g := range c.Groups {
		got[g.Group] = g.Count
		if g.ExampleID == "" {
			t.Errorf("group %q has no example", g.Group)
		}
	}
	if len(got) != 2 || got["rejected"] != wantRej {
		t.Fatalf("groups %v: want rejected=%d and one exception group of %d", got, wantRej, wantEx)
	}
	for g, cnt := range got {
		if g != "rejected" && (cnt != wantEx || !strings.Contains(g, "not found")) {
			t.Fatalf("exception group %q = %d, want %d (numbers folded)", g, cnt, wantEx)
		}
	}
	if c.AtParkLimit != 0 {
		t.Fatalf("at park limit %d, want 0 after one replay", c.AtParkLimit)
	}
	sameGroupIDs(t, rep, c)
}

// sameGroupIDs fails unless every returned copy rep lists carries the id
// of one of check c's groups: the stop line names what check shows.
func sameGroupIDs(t *testing.T, rep engine.Replay, c engine.CheckReport) {
	t.Helper()
	ids := map[string]bool{}
	for _, g := range c.Groups {
		ids[engine.GroupID(g.Group)] = true
	}
	for _, f := range rep.Failures {
		if f.Kind == engine.FailureReturned && !ids[f.GroupID] {
			t.Errorf("returned copy %s has group id %q; check's groups are %v", f.ID, f.GroupID, ids)
		}
	}
}

func TestFollowUpsRunOnceAcrossReplicasAndRestarts(t *testing.T) {
	t.Parallel()
	clock := &shiftClock{}
	base := newEnv(t, fast)
	r := base.rabbit
	src, dlq := r.DeadLettered(5, 50)
	r.Consume(src, func(amqp.Delivery) string { return "ack" })

	var mu sync.Mutex
	fired := map[string]int{}
	note := engine.NotifierFunc(func(_ context.Context, e engine.Event) {
		if e.Kind == engine.EventFollowUp {
			mu.Lock()
			fired[e.Check.Label]++
			mu.Unlock()
		}
	})
	replica := func() *replay.Service {
		svc, err := replay.New(fast, replay.Deps{Broker: base.broker, Mover: base.broker, Tokens: base.store.Tokens(),
			Ledger: base.store.Ledger(), Replays: base.store.Replays(), Leases: base.store.Leases(),
			Schedule: base.store.Schedule(), Clock: clock, Notifier: note, Counters: testkit.CountersOff{}, Consumers: testkit.ConsumersOff{}, Watches: testkit.WatchesOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, Claims: testkit.ClaimsOff{}, TapGaps: testkit.TapOff{}})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	a := replica()
	e := &env{rabbit: r, broker: base.broker, store: base.store, svc: a}
	p := preview(t, e, engine.Selection{DLQ: dlq})
	rep := approveRun(t, e, p.Token, oneStep, false)
	if rep.State != engine.StateFinished {
		t.Fatalf("replay %s", rep.State)
	}
	count := func(label string) int { mu.Lock(); defer mu.Unlock(); return fired[label] }
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, svc := range []*replay.Service{a, replica()} {
		wg.Add(1)
		go func() { defer wg.Done(); svc.FollowUps(ctx, 10*time.Millisecond) }()
	}
	clock.Advance(5*time.Minute + time.Second)
	testkit.Eventually(t, 10*time.Second, "+5m follow-up", func() bool { return count("+5m") > 0 })
	clock.Advance(2 * time.Hour)
	testkit.Eventually(t, 10*time.Second, "+2h follow-up", func() bool { return count("+2h") > 0 })
	stop() // both replicas restart
	wg.Wait()
	clock.Advance(22 * time.Hour)
	ctx, stop = context.WithCancel(context.Background())
	defer stop()
	for _, svc := range []*replay.Service{replica(), replica()} {
		go svc.FollowUps(ctx, 10*time.Millisecond)
	}
	testkit.Eventually(t, 10*time.Second, "+24h follow-up", func() bool { return count("+24h") > 0 })
	// Give the replicas a few more polls to misbehave.
	for i := 0; i < 5; i++ {
		replay.RunDue(a, context.Background())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(fired) != 3 || fired["+5m"] != 1 || fired["+2h"] != 1 || fired["+24h"] != 1 {
		t.Fatalf("follow-ups fired %v, want each of +5m, +2h, +24h exactly once", fired)
	}
}

func TestParkMovesExactlyTheMessagesAtTheLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	var msgs []amqp.Publishing
	for i := 0; i < 12; i++ {
		h := amqp.Table{}
		if i%2 == 0 { // replayed twice before: the next failure reaches park_after=3
			h["x-replay-count"] = int32(2)
			h["x-replay-id"] = "r_00000000000000ee"
		}
		msgs = append(msgs, testkit.Msg(fmt.Sprintf("m-%d", i), []byte(fmt.Sprint(i)), h))
	}
	r.Reject(src, msgs...)
	r.WaitCount(dlq, 12, 20*time.Second)
	p := preview(t, e, engine.Selection{DLQ: dlq, Limit: 10}) // two stay unsent
	r.Consume(src, func(amqp.Delivery) string { return "reject" })
	rep := approveRun(t, e, p.Token, oneStep, false)
	if rep.State != engine.StateStopped || rep.Returned != 10 {
		t.Fatalf("replay %s, %d back: want stopped with all 10 back", rep.State, rep.Returned)
	}
	ctx := context.Background()
	c, err := e.svc.Check(ctx, rep.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.AtParkLimit != 5 || len(c.ParkIDs) != 5 {
		t.Fatalf("at park limit %d (%d ids), want 5", c.AtParkLimit, len(c.ParkIDs))
	}
	res, err := e.svc.Park(ctx, rep.ID, "U_PARK")
	if err != nil {
		t.Fatal(err)
	}
	parking := engine.ParkingQueue(dlq)
	defer testkit.DeleteQueue(parking)
	if res.Parked != 5 || res.Failed != 0 || res.Queue != parking {
		t.Fatalf("park %+v, want 5 parked to %s", res, parking)
	}
	parked := r.Drain(parking, 5, 2*time.Second)
	left := r.Drain(dlq, 7, 2*time.Second)
	if len(parked) != 5 || len(left) != 7 {
		t.Fatalf("parking holds %d, DLQ %d: want 5 and 7 (none lost)", len(parked), len(left))
	}
	for _, d := range parked {
		n, _ := strconv.Atoi(strings.TrimPrefix(d.MessageId, "m-"))
		if n%2 != 0 || d.Headers["x-replay-count"] != int32(3) || d.Headers["x-replay-id"] != rep.ID {
			t.Errorf("parked %s with count %v id %v: want only the even ones, at 3 replays", d.MessageId, d.Headers["x-replay-count"], d.Headers["x-replay-id"])
		}
	}
}
