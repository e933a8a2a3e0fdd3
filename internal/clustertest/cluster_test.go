package clustertest_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
	broker "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/clustertest"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// fast makes steps settle quickly.
var fast = replay.Config{SettleGrace: 300 * time.Millisecond, SettlePoll: 50 * time.Millisecond,
	ControlPoll: 50 * time.Millisecond, LeaseTTL: 10 * time.Second}

// deliveries counts what the test consumer received, by message id.
type deliveries struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *deliveries) handle(m amqp.Delivery) string {
	d.mu.Lock()
	d.n[m.MessageId]++
	d.mu.Unlock()
	return "ack"
}

func (d *deliveries) total() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := 0
	for _, c := range d.n {
		t += c
	}
	return t
}

// TestReplayOnRedisCluster runs a whole replay — preview, approve, a run in
// canary steps, the ledger, a check, scheduled follow-ups, control and the
// job queue — with the store on a local three-master Redis Cluster reached
// through store.Open's Cluster URL form. Redis Cluster refuses any Lua
// script, MULTI or WATCH whose keys span slots (CROSSSLOT), so passing proves
// the key layout keeps each of them in one slot.
func TestReplayOnRedisCluster(t *testing.T) {
	if err := clustertest.Available(); err != nil {
		t.Skipf("no local Redis Cluster: %v", err)
	}
	t.Parallel()
	addrs := clustertest.StartCluster(t, 3)
	rdb, err := store.Open("redis://" + strings.Join(addrs, ","))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("store.Open gave a %T for a Cluster URL", rdb)
	}
	ctx := context.Background()

	// The cluster really enforces slots: a script over two tags is refused.
	err = rdb.Eval(ctx, "return redis.call('MGET', KEYS[1], KEYS[2])", []string{"{a}:x", "{b}:x"}).Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("a cross-slot script was not refused (%v): the cluster does not check slots", err)
	}

	st, err := store.New(store.Config{Prefix: testkit.Name("cluster") + ":"}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(broker.Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	var mu sync.Mutex
	var events []engine.EventKind // of the first replay
	var first string
	svc, err := replay.New(fast, replay.Deps{
		Broker: b, Mover: b, Counters: b, Watches: b,
		Tokens: st.Tokens(), Ledger: st.Ledger(), Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(),
		Notifier: engine.NotifierFunc(func(_ context.Context, e engine.Event) {
			mu.Lock()
			if first == "" {
				first = e.Replay.ID
			}
			if e.Replay.ID == first {
				events = append(events, e.Kind)
			}
			mu.Unlock()
		}),
		Consumers: testkit.ConsumersOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, Claims: testkit.ClaimsOff{}, TapGaps: testkit.TapOff{},
	})
	if err != nil {
		t.Fatal(err)
	}

	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	const n = 60
	msgs := testkit.Msgs(n, 200)
	r.Reject(src, msgs...)
	r.WaitCount(dlq, n, 20*time.Second)

	// Preview (token Lua, ledger history pipelines across slots).
	p, err := svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U_REQ")
	if err != nil {
		t.Fatal(err)
	}
	if p.Token == "" || p.Selected != n {
		t.Fatalf("preview: token %q, %d selected, want %d", p.Token, p.Selected, n)
	}
	// A second preview is discarded (Lua on the token's two keys).
	p2, err := svc.Preview(ctx, engine.Selection{DLQ: dlq, Limit: 1}, "U_REQ")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Tokens().Discard(ctx, p2.Token); err != nil {
		t.Fatalf("discard: %v", err)
	}

	// Approve (consume Lua, create Lua + index) and run in canary steps of
	// 10, 20, 30 (lease Lua, fenced put Lua, ledger pipelines).
	rec := &deliveries{n: map[string]int{}}
	consumer := r.Consume(src, rec.handle)
	ap, err := svc.ApproveConfirmed(ctx, p.Token, "U_APP", "", engine.Params{Step: 10, Cap: 30, Rate: -1, Timeout: 20 * time.Second}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Tokens().Consume(ctx, p.Token, "r_other"); err == nil {
		t.Fatal("a used token was consumed again")
	}
	rep, err := svc.Run(ctx, ap.Replay.ID, "owner-cluster")
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if rep.State != engine.StateFinished || rep.Sent != n || rep.Step != 3 {
		t.Fatalf("replay %s: state %s, sent %d in %d steps (%s); want finished, %d in 3", rep.ID, rep.State, rep.Sent, rep.Step, rep.Note, n)
	}
	testkit.Eventually(t, 20*time.Second, "every copy delivered", func() bool { return rec.total() >= n })
	r.WaitCount(dlq, 0, 10*time.Second)

	// The ledger: one confirmed entry per message, and each message's
	// history names this replay and its approver.
	entries, err := st.Ledger().Entries(ctx, rep.ID)
	if err != nil {
		t.Fatal(err)
	}
	confirmed := 0
	for _, e := range entries {
		if !e.Pending {
			confirmed++
		}
	}
	if confirmed != n {
		t.Fatalf("ledger: %d confirmed entries, want %d", confirmed, n)
	}
	ids := make([]string, len(p.Messages))
	for i, m := range p.Messages {
		ids[i] = m.ID
	}
	hist, err := st.Ledger().History(ctx, dlq, ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		h := hist[id]
		if len(h) != 1 || h[0].ReplayID != rep.ID || h[0].Count != 1 || h[0].Approver != "U_APP" {
			t.Fatalf("history of %s: %+v, want one send by %s approved by U_APP", id, h, rep.ID)
		}
	}

	// Check and the follow-ups it scheduled (single-key Lua claim).
	c, err := svc.Check(ctx, rep.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Replayed != n || c.Returned != 0 || len(c.Groups) != 0 {
		t.Fatalf("check: %+v, want %d replayed and none back", c, n)
	}
	due, err := st.Schedule().ClaimDue(ctx, time.Now().Add(48*time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != len(engine.DefaultFollowUps) {
		t.Fatalf("claimed %d follow-ups, want %d: %v", len(due), len(engine.DefaultFollowUps), due)
	}

	// Control and hand-over: a replay that is approved but not run is
	// cancelled (WATCH/MULTI on its hash and lease), after a desired state
	// was recorded (Lua + publish) and the job queue handed it to a worker
	// (stream group, reclaim).
	consumer.Stop()
	r.Reject(src, testkit.Msg("late", []byte("late"), nil))
	r.WaitCount(dlq, 1, 20*time.Second)
	rec2 := rec.total()
	p3, err := svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U_REQ")
	if err != nil {
		t.Fatal(err)
	}
	ap3, err := svc.ApproveConfirmed(ctx, p3.Token, "U_APP", "", engine.Params{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Workers().Announce(ctx, "w-cluster", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if ws, err := st.Workers().List(ctx); err != nil || len(ws) != 1 {
		t.Fatalf("workers: %v %v", ws, err)
	}
	if err := st.Jobs().Enqueue(ctx, ap3.Replay.ID); err != nil {
		t.Fatal(err)
	}
	got, ack, err := st.Jobs().Next(ctx, "w-cluster", time.Second)
	if err != nil || got != ap3.Replay.ID {
		t.Fatalf("next job: %q %v, want %s", got, err, ap3.Replay.ID)
	}
	if err := ack(); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Control(ctx, ap3.Replay.ID, engine.ControlPause, "U_TEST"); err != nil {
		t.Fatal(err)
	}
	if d, _, err := st.Replays().Desired(ctx, ap3.Replay.ID); err != nil || d != engine.StatePaused {
		t.Fatalf("desired %q %v, want paused", d, err)
	}
	cancelled, err := svc.Control(ctx, ap3.Replay.ID, engine.ControlCancel, "U_TEST")
	if err != nil || cancelled.State != engine.StateCancelled {
		t.Fatalf("cancel: %v, state %s", err, cancelled.State)
	}
	if rs, err := st.Replays().List(ctx, 0); err != nil || len(rs) != 2 {
		t.Fatalf("list: %d replays, %v; want 2", len(rs), err)
	}
	if r.Count(dlq) != 1 || rec.total() != rec2 {
		t.Fatal("the cancelled replay moved messages")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) == 0 || events[0] != engine.EventStarted || events[len(events)-1] != engine.EventFinished {
		t.Fatalf("events %v, want started … finished", events)
	}
	t.Logf("replay %s on a 3-master cluster %v: %d sent in %d steps, %d ledger entries, check: %d back",
		rep.ID, addrs, rep.Sent, rep.Step, len(entries), c.Returned)
}
