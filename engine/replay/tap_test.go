package replay_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// fourDialects consumes src like four applications at once, failing
// messages by their order number: n%6 == 0 rejected (the broker
// dead-letters it with x-death), 1 republished by Spring's recoverer, 2 by
// MassTransit, 3 by NServiceBus — each to the dead-letter exchange with the
// DLQ's routing key, headers copied and its own failure headers added —
// and the rest acked.
func fourDialects(t *testing.T, r *testkit.Rabbit, src, dlx, dlq string) {
	pub := r.Channel()
	r.Consume(src, func(d amqp.Delivery) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(d.MessageId, "m-"))
		h := amqp.Table{}
		for k, v := range d.Headers {
			h[k] = v
		}
		switch n % 6 {
		case 0:
			return "reject"
		case 1:
			h["x-exception-message"] = fmt.Sprintf("order %d not found", 1000+n)
			h["x-original-exchange"] = ""
			h["x-original-routingKey"] = src
		case 2:
			h["MT-Reason"] = "fault"
			h["MT-Fault-ExceptionType"] = "System.InvalidOperationException"
			h["MT-Fault-Message"] = fmt.Sprintf("payment %d declined", 7700+n)
			h["MT-Fault-InputAddress"] = "rabbitmq://localhost/" + src
		case 3:
			h["NServiceBus.FailedQ"] = src
			h["NServiceBus.ExceptionInfo.ExceptionType"] = "Shop.Billing.TimeoutException"
			h["NServiceBus.ExceptionInfo.Message"] = fmt.Sprintf("timed out after %d ms", 30+n)
		default:
			return "ack"
		}
		if err := pub.PublishWithContext(context.Background(), dlx, dlq, false, false,
			amqp.Publishing{Headers: h, MessageId: d.MessageId, Body: d.Body, DeliveryMode: amqp.Persistent}); err != nil {
			t.Errorf("republish %s: %v", d.MessageId, err)
		}
		return "ack"
	})
}

// givenBack is how many times a quorum queue's message was given back
// before this delivery, as on broker shows it: x-delivery-count before
// 4.3, which counts every return; x-acquired-count on 4.3, whose
// x-delivery-count counts only failures (0 when absent).
func givenBack(on testkit.Broker, d amqp.Delivery) int {
	h := "x-delivery-count"
	if !on.RequeueCounts() {
		h = "x-acquired-count"
	}
	switch v := d.Headers[h].(type) {
	case int64:
		return int(v)
	case int32:
		return int(v)
	case int:
		return int(v)
	}
	return 0
}

func TestTapFindsReturnsOfEveryDialectWithoutReadingTheDLQ(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, b testkit.Broker) {
		for _, kind := range []string{"classic", "quorum"} {
			t.Run(kind, func(t *testing.T) {
				t.Parallel()
				var args amqp.Table
				if kind == "quorum" {
					args = testkit.Quorum(nil)
				}
				tapFindsReturns(t, b, args)
			})
		}
	})
}

func tapFindsReturns(t *testing.T, b testkit.Broker, dlqArgs amqp.Table) {
	ctx := context.Background()
	e := newTapEnv(t, b, fast, nil)
	r := e.rabbit
	src, other, dlq := testkit.Name("src"), testkit.Name("other"), testkit.Name("dlq")
	dlx := r.DLXTopology(src, dlq, dlqArgs)
	r.Queue(other, amqp.Table{"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": dlq})
	// U, at the head of the DLQ and left out of the selection, is read by
	// every read of the DLQ: on a quorum DLQ its delivery count is the
	// number of reads.
	r.Reject(other, testkit.Msg("u", []byte("u"), nil))
	const n = 30
	r.Reject(src, testkit.Msgs(n, 100)...)
	r.WaitCount(dlq, n+1, 20*time.Second)

	p := preview(t, &e.env, engine.Selection{DLQ: dlq, Source: src})
	if p.Selected != n || p.Returns.Mode != engine.ReturnsTap || p.Returns.Tap == "" {
		t.Fatalf("preview selected %d, returns %+v: want %d through a tap", p.Selected, p.Returns, n)
	}
	fourDialects(t, r, src, dlx, dlq)
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", oneStep, false)
	if err != nil {
		t.Fatal(err)
	}
	scans0, moves0 := e.reads.of(dlq)
	rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner-"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	wantBack := 4 * n / 6
	// The step ends a grace period after its copies left the target, so
	// on a loaded machine a few returns may come later: the check counts
	// them all.
	if rep.State != engine.StateStopped || rep.Sent != n || rep.Returned == 0 || rep.Returned > wantBack || rep.ReturnsMode != engine.ReturnsTap {
		t.Fatalf("replay %s sent %d returned %d mode %q (%s): want stopped, %d sent, up to %d back, tap", rep.State, rep.Sent, rep.Returned, rep.ReturnsMode, rep.Note, n, wantBack)
	}
	listed := 0
	for _, f := range rep.Failures {
		if f.Kind == engine.FailureReturned {
			listed++
		}
	}
	if listed != rep.Returned {
		t.Fatalf("%d returned failures listed, want %d", listed, rep.Returned)
	}
	// Failures unrelated to the replay, through the exchange as ever.
	r.Reject(other, testkit.Msg("new-0", []byte("x"), nil), testkit.Msg("new-1", []byte("y"), nil))
	r.WaitCount(dlq, 1+wantBack+2, 20*time.Second)
	c, err := e.svc.Check(ctx, rep.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	scans, moves := e.reads.of(dlq)
	if scans != scans0 || moves != moves0+1 {
		t.Fatalf("the run and the check read the DLQ %d time(s) and moved %d: want no read, one move", scans-scans0, moves-moves0)
	}
	// What is in the DLQ, by the broker: the exact groups to expect.
	left := r.Drain(dlq, 1+wantBack+2, 3*time.Second)
	want := map[string]int{}
	newOnes := 0
	for _, d := range left {
		m := engine.Message{Headers: map[string]any(d.Headers), MessageID: d.MessageId, Body: d.Body}
		meta := engine.ParseMetaDialect(dlq, m, engine.HeaderDialect{})
		switch {
		case meta.ReplayID == rep.ID && meta.Returned:
			want[meta.FailureGroup]++
		case d.MessageId != "u":
			newOnes++
		}
		if d.MessageId == "u" && dlqArgs != nil {
			// Every read gave U back once: preview, approval, the move.
			if got := givenBack(b, d); got != scans+moves {
				t.Errorf("U was given back %d time(s); the engine read the DLQ %d time(s)", got, scans+moves)
			}
		}
	}
	if len(want) != 4 || newOnes != 2 {
		t.Fatalf("the DLQ holds groups %v and %d new failures: want 4 groups (one per dialect) and 2", want, newOnes)
	}
	got := map[string]int{}
	for _, g := range c.Groups {
		got[g.Group] = g.Count
		if g.ExampleID == "" {
			t.Errorf("group %q has no example", g.Group)
		}
	}
	if c.Replayed != n || c.Returned != wantBack || c.NewFailures != 2 || !reflect.DeepEqual(got, want) {
		t.Fatalf("check: replayed %d returned %d new %d groups %v; want %d %d 2 %v", c.Replayed, c.Returned, c.NewFailures, got, n, wantBack, want)
	}
	sameGroupIDs(t, rep, c)
}
