package replay_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	broker "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// snapshot drains q and publishes the same messages back in order, so the
// test holds an exact copy of the queue's contents (x-death included).
func snapshot(t *testing.T, r *testkit.Rabbit, q string, n int) []amqp.Delivery {
	t.Helper()
	// It stops at the nth message; the idle bound only ends a wait for
	// messages that are not there (a 5 MB message took longer than 3 s to
	// arrive beside make test's other lanes).
	ds := r.Drain(q, n, 30*time.Second)
	if len(ds) != n {
		t.Fatalf("snapshot %s: drained %d, want %d", q, len(ds), n)
	}
	pubs := make([]amqp.Publishing, len(ds))
	for i, d := range ds {
		pubs[i] = amqp.Publishing{Headers: stripDeliveryCount(d.Headers), MessageId: d.MessageId, Body: d.Body,
			ContentType: d.ContentType, ContentEncoding: d.ContentEncoding, DeliveryMode: d.DeliveryMode,
			Timestamp: d.Timestamp, Type: d.Type, CorrelationId: d.CorrelationId, AppId: d.AppId,
			Priority: d.Priority, ReplyTo: d.ReplyTo, UserId: d.UserId, Expiration: d.Expiration}
	}
	r.Publish(q, pubs...)
	return ds
}

func stripDeliveryCount(h amqp.Table) amqp.Table {
	out := amqp.Table{}
	for k, v := range h {
		if k != "x-delivery-count" {
			out[k] = v
		}
	}
	return out
}

// sameQueue asserts that q holds exactly want, in order, byte for byte
// (x-delivery-count aside, which a quorum queue raises on every requeue).
func sameQueue(t *testing.T, r *testkit.Rabbit, q string, want []amqp.Delivery) {
	t.Helper()
	r.WaitCount(q, len(want), 20*time.Second)
	got := r.Drain(q, len(want), 3*time.Second)
	if len(got) != len(want) {
		t.Fatalf("%s holds %d messages after the preview, want %d", q, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.MessageId != w.MessageId || string(g.Body) != string(w.Body) || g.ContentType != w.ContentType ||
			g.DeliveryMode != w.DeliveryMode || !reflect.DeepEqual(stripDeliveryCount(g.Headers), stripDeliveryCount(w.Headers)) {
			t.Fatalf("message %d changed:\n got  %s %q %v\n want %s %q %v", i, g.MessageId, g.Body, g.Headers, w.MessageId, w.Body, w.Headers)
		}
	}
}

func TestPreviewReportsProblemsAndChangesNothing(t *testing.T) {
	t.Parallel()
	for _, c := range testkit.Matrix("classic", "quorum") {
		t.Run(c.Name(), func(t *testing.T) {
			t.Parallel()
			c.Broker.Require(t)
			kind := c.Kind
			e := newEnvOn(t, replay.Config{}, c.Broker)
			r := e.rabbit
			dlq := testkit.Name("dlq")
			var dlqArgs amqp.Table
			if kind == "quorum" {
				dlqArgs = testkit.Quorum(amqp.Table{"x-delivery-limit": 50})
			}
			ok, idle, gone := testkit.Name("ok"), testkit.Name("idle"), testkit.Name("gone")
			r.Topology(ok, dlq, dlqArgs)
			r.Queue(idle, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
			r.Queue(gone, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
			for i := 0; i < 5; i++ {
				r.Reject(ok, testkit.Msg(fmt.Sprintf("ok-%d", i), testkit.Body(i, 300), nil))
			}
			r.Reject(idle, testkit.Msg("idle-0", testkit.Body(10, 300), nil), testkit.Msg("idle-1", testkit.Body(11, 300), nil), testkit.Msg("idle-2", testkit.Body(12, 300), nil))
			r.Reject(gone, testkit.Msg("gone-0", testkit.Body(20, 300), nil), testkit.Msg("gone-1", testkit.Body(21, 300), nil))
			// One that an earlier replay sent and that failed again, one at the park limit.
			r.Reject(ok, testkit.Msg("again", testkit.Body(30, 300), amqp.Table{"x-replay-id": "r_0123456789abcdef", "x-replay-count": int32(1)}))
			r.Reject(ok, testkit.Msg("parked", testkit.Body(31, 300), amqp.Table{"x-replay-id": "r_0123456789abcdef", "x-replay-count": int32(3)}))
			r.WaitCount(dlq, 12, 20*time.Second)
			r.DeleteQueue(gone)
			r.Consume(ok, func(amqp.Delivery) string { return "ack" })

			before := snapshot(t, r, dlq, 12)
			ctx := context.Background()
			p, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U1")
			if err != nil {
				t.Fatal(err)
			}
			sameQueue(t, r, dlq, before)

			if p.Scanned != 12 || p.Selected != 11 || p.Parked != 1 {
				t.Fatalf("scanned %d selected %d parked %d, want 12 11 1", p.Scanned, p.Selected, p.Parked)
			}
			kinds := []engine.ProblemKind{}
			for _, pr := range p.Problems {
				kinds = append(kinds, pr.Kind)
			}
			want := []engine.ProblemKind{engine.ProblemTargetMissing, engine.ProblemNoConsumers, engine.ProblemAlreadyReplayed, engine.ProblemParked}
			if kind == "quorum" && c.Broker.RequeueCounts() {
				// Before 4.3 every read counts against the delivery limit;
				// 4.3 counts no give-back, so no warning.
				want = append(want, engine.ProblemDeliveryLimit)
			}
			if !reflect.DeepEqual(kinds, want) {
				t.Fatalf("problems %v, want %v (missing targets first)", kinds, want)
			}
			targets := map[string]engine.TargetView{}
			for _, tv := range p.Targets {
				targets[tv.Queue] = tv
			}
			if tv := targets[gone]; tv.Exists || tv.Messages != 2 {
				t.Errorf("gone target %+v, want missing with 2 messages", tv)
			}
			if tv := targets[idle]; !tv.Exists || tv.Consumers != 0 || tv.Messages != 3 {
				t.Errorf("idle target %+v, want existing, 0 consumers, 3 messages", tv)
			}
			if tv := targets[ok]; !tv.Exists || tv.Consumers != 1 || tv.Messages != 6 {
				t.Errorf("ok target %+v, want 1 consumer, 6 messages", tv)
			}
			for _, m := range p.Messages {
				if m.Reason != engine.ReasonRejected || m.Attempts != 1 || m.Dialect != engine.DialectRabbitMQ {
					t.Errorf("message %s: reason %s attempts %d dialect %s", m.MessageID, m.Reason, m.Attempts, m.Dialect)
				}
				if m.MessageID == "again" && (m.ReplayCount != 1 || m.ReplayID != "r_0123456789abcdef") {
					t.Errorf("replayed message: count %d id %q", m.ReplayCount, m.ReplayID)
				}
			}
			if p.DLQ.Type != kind {
				t.Errorf("DLQ type %q, want %q", p.DLQ.Type, kind)
			}

			// The token freezes exactly the selected multiset.
			f, err := e.store.Tokens().Load(ctx, p.Token)
			if err != nil {
				t.Fatal(err)
			}
			if f.Total != 11 || len(f.Items) != 11 || f.DLQ != dlq || f.Requester != "U1" {
				t.Fatalf("frozen: total %d items %d dlq %s requester %s", f.Total, len(f.Items), f.DLQ, f.Requester)
			}
			if len(p.Token) < 24 {
				t.Errorf("token %q too short for 128 random bits", p.Token)
			}
		})
	}
}

func TestPreviewShowsLedgerHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, replay.Config{})
	r := e.rabbit
	src, dlq := r.DeadLettered(3, 100)
	ctx := context.Background()
	p1, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U1")
	if err != nil {
		t.Fatal(err)
	}
	id := p1.Messages[1].ID
	at := time.Now().UTC().Truncate(time.Second)
	if err := e.store.Ledger().Confirm(ctx, []engine.LedgerEntry{{ReplayID: "r_00000000000000aa", DLQ: dlq, ID: id, Target: src, At: at}}); err != nil {
		t.Fatal(err)
	}
	p2, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U1")
	if err != nil {
		t.Fatal(err)
	}
	m := p2.Messages[1]
	if m.ID != id || len(m.Replayed) != 1 || m.Replayed[0].ReplayID != "r_00000000000000aa" || !m.Replayed[0].At.Equal(at) {
		t.Fatalf("history of %s: %+v", id, m.Replayed)
	}
	if p2.Problems[len(p2.Problems)-1].Kind != engine.ProblemAlreadyReplayed && p2.Problems[0].Kind != engine.ProblemAlreadyReplayed {
		found := false
		for _, pr := range p2.Problems {
			found = found || (pr.Kind == engine.ProblemAlreadyReplayed && pr.Messages == 1)
		}
		if !found {
			t.Fatalf("problems %+v lack already_replayed for 1 message", p2.Problems)
		}
	}
}

func TestPreviewSelectionFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, replay.Config{})
	r := e.rabbit
	a, b, dlq := testkit.Name("a"), testkit.Name("b"), testkit.Name("dlq")
	r.Topology(a, dlq, nil)
	r.Queue(b, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	r.Reject(a, testkit.Msgs(4, 100)...)                                                          // 4 rejected from a
	r.Expire(b, testkit.Msg("exp-0", []byte("x0"), nil), testkit.Msg("exp-1", []byte("x1"), nil)) // 2 expired from b
	r.WaitCount(dlq, 6, 20*time.Second)
	// Two Spring-style failures published straight into the DLQ, one old.
	old := time.Now().Add(-48 * time.Hour).UTC().Format("2006-01-02 15:04:05:000000 Z")
	r.Publish(dlq,
		testkit.Msg("nsb-old", []byte("n0"), amqp.Table{"NServiceBus.FailedQ": b + "@host", "NServiceBus.TimeOfFailure": old,
			"NServiceBus.ExceptionInfo.ExceptionType": "System.TimeoutException", "NServiceBus.ExceptionInfo.Message": "timeout while calling payments"}),
		testkit.Msg("spring-1", []byte("s1"), amqp.Table{"x-original-exchange": "", "x-original-routingKey": a,
			"x-exception-message": "order 123 not found"}),
	)
	r.WaitCount(dlq, 8, 20*time.Second)
	ctx := context.Background()
	all, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U1")
	if err != nil {
		t.Fatal(err)
	}
	if all.Selected != 8 {
		t.Fatalf("selected %d, want 8", all.Selected)
	}
	now := time.Now()
	cases := []struct {
		name string
		sel  engine.Selection
		want int
	}{
		{"reason", engine.Selection{Reason: engine.ReasonExpired}, 2},
		{"source", engine.Selection{Source: a}, 5},
		{"source and reason", engine.Selection{Source: a, Reason: engine.ReasonRejected}, 4},
		{"since 1h", engine.Selection{Since: now.Add(-time.Hour)}, 6 + 0},
		{"until 1h ago", engine.Selection{Until: now.Add(-time.Hour)}, 1},
		{"exception", engine.Selection{Exception: "TIMEOUT"}, 1},
		{"limit", engine.Selection{Limit: 3}, 3},
		{"limit and source", engine.Selection{Source: b, Limit: 2}, 2},
		{"ids", engine.Selection{IDs: []string{all.Messages[0].ID, all.Messages[7].ID}}, 2},
		{"ids and reason", engine.Selection{IDs: []string{all.Messages[0].ID, all.Messages[7].ID}, Reason: engine.ReasonRejected}, 1},
		{"park_after 0 replays", engine.Selection{ParkAfter: 1}, 8},
	}
	for _, c := range cases {
		sel := c.sel
		sel.DLQ = dlq
		p, err := e.svc.Preview(ctx, sel, "U1")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if p.Selected != c.want {
			t.Errorf("%s (%s): selected %d, want %d", c.name, sel, p.Selected, c.want)
		}
	}
	r.WaitCount(dlq, 8, 20*time.Second)
}

func TestPreviewBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, replay.Config{})
	r := e.rabbit
	_, dlq := r.DeadLettered(3, 100)
	ctx := context.Background()

	_, err := e.svc.Preview(ctx, engine.Selection{DLQ: testkit.Name("nope")}, "U1")
	if !errors.Is(err, engine.ErrQueueNotFound) {
		t.Fatalf("unknown queue: %v, want ErrQueueNotFound", err)
	}

	down, err := broker.New(broker.Config{URL: "amqp://guest:guest@127.0.0.1:1/", ManagementURL: "http://guest:guest@127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := replay.New(replay.Config{}, replay.Deps{Broker: down, Mover: down, Tokens: e.store.Tokens(), Ledger: e.store.Ledger(),
		Replays: e.store.Replays(), Leases: e.store.Leases(), Schedule: e.store.Schedule(), Counters: testkit.CountersOff{}, Consumers: testkit.ConsumersOff{}, Watches: testkit.WatchesOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, Claims: testkit.ClaimsOff{}, TapGaps: testkit.TapOff{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U1"); !errors.Is(err, engine.ErrBrokerUnavailable) {
		t.Fatalf("unreachable broker: %v, want ErrBrokerUnavailable", err)
	}

	rdb, err := store.Open("redis://127.0.0.1:1/0")
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	bad, err := store.New(store.Config{Prefix: testkit.Name("x") + ":"}, rdb, engine.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err = replay.New(replay.Config{}, replay.Deps{Broker: e.broker, Mover: e.broker, Tokens: bad.Tokens(), Ledger: bad.Ledger(),
		Replays: bad.Replays(), Leases: bad.Leases(), Schedule: bad.Schedule(), Counters: testkit.CountersOff{}, Consumers: testkit.ConsumersOff{}, Watches: testkit.WatchesOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, Claims: testkit.ClaimsOff{}, TapGaps: testkit.TapOff{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U1"); !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Fatalf("unreachable redis: %v, want ErrStoreUnavailable", err)
	}
	r.WaitCount(dlq, 3, 20*time.Second)
}

// republish turns drained deliveries back into publishings, unchanged.
func republish(ds []amqp.Delivery) []amqp.Publishing {
	out := make([]amqp.Publishing, len(ds))
	for i, d := range ds {
		out[i] = amqp.Publishing{Headers: d.Headers, MessageId: d.MessageId, Body: d.Body, ContentType: d.ContentType,
			ContentEncoding: d.ContentEncoding, DeliveryMode: d.DeliveryMode, Timestamp: d.Timestamp, Type: d.Type,
			CorrelationId: d.CorrelationId, AppId: d.AppId, Priority: d.Priority, ReplyTo: d.ReplyTo, UserId: d.UserId}
	}
	return out
}
