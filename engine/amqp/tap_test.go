package amqp

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

// tapBindings lists the tap's bindings as "exchange/key".
func tapBindings(t *testing.T, b *Broker, tap string) []string {
	t.Helper()
	bs, err := b.mgmt.queueBindings(context.Background(), tap)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range bs {
		out = append(out, x.Source+"/"+x.RoutingKey)
	}
	return out
}

func TestTapCopiesTheDLQsBindingsAndFollowsTheirChanges(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, tb testkit.Broker) {
		t.Parallel()
		ctx := context.Background()
		r := tb.Dial(t)
		b := testBroker(t, onBroker(tb, Config{}))
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		dlx := r.DLXTopology(src, dlq, nil)

		st, err := b.EnsureTap(ctx, dlq)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode != engine.ReturnsTap || st.Queue != "dlqbot.tap."+dlq || st.Bindings != 1 {
			t.Fatalf("tap state %+v", st)
		}
		q, err := b.mgmt.queue(ctx, st.Queue, false)
		if err != nil {
			t.Fatal(err)
		}
		if q.queueType() != "classic" || argInt(q.Arguments["x-message-ttl"]) != int(TapTTL/time.Millisecond) ||
			argInt(q.Arguments["x-max-length"]) != TapMaxLength || q.Arguments["x-overflow"] != "drop-head" {
			t.Fatalf("tap %s arguments %v: want a classic queue bounded by TTL and length, dropping the oldest", st.Queue, q.Arguments)
		}
		if got := tapBindings(t, b, st.Queue); len(got) != 1 || got[0] != dlx+"/"+dlq {
			t.Fatalf("tap bindings %v, want the DLQ's one %s/%s", got, dlx, dlq)
		}

		// The DLQ's bindings change: a headers exchange with arguments
		// comes, the direct one goes. The next EnsureTap follows.
		hx := testkit.Name("hx")
		ch := r.Channel()
		if err := ch.ExchangeDeclare(hx, "headers", false, true, false, false, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Channel().ExchangeDelete(hx, false, false) })
		match := amqp.Table{"x-match": "all", "kind": "failure", "tries": int32(3)}
		if err := ch.QueueBind(dlq, "", hx, false, match); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueueUnbind(dlq, dlq, dlx, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.EnsureTap(ctx, dlq); err != nil {
			t.Fatal(err)
		}
		if got := tapBindings(t, b, st.Queue); len(got) != 1 || got[0] != hx+"/" {
			t.Fatalf("tap bindings %v after the change, want only %s/ (with its arguments)", got, hx)
		}
		// A message routed by the header arguments reaches both.
		pub := amqp.Publishing{MessageId: "h-1", Body: []byte("x"), Headers: amqp.Table{"kind": "failure", "tries": int32(3)}}
		if err := testkit.PublishTo(r.Conn, hx, "", pub); err != nil {
			t.Fatal(err)
		}
		r.WaitCount(dlq, 1, 10*time.Second)
		r.WaitCount(st.Queue, 1, 10*time.Second)

		var got []engine.Message
		n, err := b.DrainTap(ctx, dlq, func(ms []engine.Message) error {
			for _, m := range ms {
				m.Body = append([]byte(nil), m.Body...)
				got = append(got, m)
			}
			return nil
		})
		if err != nil || n != 1 || len(got) != 1 || got[0].MessageID != "h-1" {
			t.Fatalf("drained %d %v: %+v", n, err, got)
		}
		if r.Count(st.Queue) != 0 || r.Count(dlq) != 1 {
			t.Fatalf("after the drain: tap %d, DLQ %d; want 0 and 1 (the DLQ is not touched)", r.Count(st.Queue), r.Count(dlq))
		}
	})
}

func TestDrainTapGivesABatchBackWhenItCannotBeRecorded(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, tb testkit.Broker) {
		t.Parallel()
		ctx := context.Background()
		r := tb.Dial(t)
		b := testBroker(t, onBroker(tb, Config{}))
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.DLXTopology(src, dlq, nil)
		if n, err := b.DrainTap(ctx, dlq, nil); n != 0 || !errors.Is(err, engine.ErrQueueNotFound) {
			t.Fatalf("drain of a missing tap: %d %v, want 0 and ErrQueueNotFound", n, err)
		}
		if _, err := b.EnsureTap(ctx, dlq); err != nil {
			t.Fatal(err)
		}
		r.Reject(src, testkit.Msgs(1200, 20)...)
		tap := TapName(dlq)
		r.WaitCount(tap, 1200, 20*time.Second)
		calls, first := 0, 0
		_, err := b.DrainTap(ctx, dlq, func(ms []engine.Message) error {
			calls++
			if calls == 2 {
				return fmt.Errorf("store down")
			}
			first = len(ms)
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), "store down") {
			t.Fatalf("drain error %v, want the record's", err)
		}
		r.WaitCount(tap, 1200-first, 20*time.Second) // the first batch recorded, the rest given back
		redelivered := 0
		n, err := b.DrainTap(ctx, dlq, func(ms []engine.Message) error {
			for _, m := range ms {
				if m.Redelivered {
					redelivered++
				}
			}
			return nil
		})
		if err != nil || n != 1200-first || redelivered == 0 {
			t.Fatalf("second drain %d (%d redelivered) %v: want %d, some flagged redelivered", n, redelivered, err, 1200-first)
		}
	})
}

func TestTapNameFitsTheLimit(t *testing.T) {
	long := strings.Repeat("é", 127) // 254 bytes
	n := TapName(long)
	if len(n) > 255 || !strings.HasPrefix(n, TapPrefix) || n == TapName(long+"x") {
		t.Fatalf("tap name %q (%d bytes)", n, len(n))
	}
	if TapName("orders.dlq") != "dlqbot.tap.orders.dlq" {
		t.Fatal(TapName("orders.dlq"))
	}
}

// argInt reads a queue argument as an int (0 when it is not a number).
func argInt(v any) int {
	n, _ := intValue(v)
	return n
}
