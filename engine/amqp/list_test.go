package amqp

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
)

// TestListQueuesFindsDeadLetterTargets: a queue another dead-letters into
// by name, and one bound to another's dead-letter exchange, are listed as
// dead-letter targets with their depth; a plain queue is listed but is
// not one.
func TestListQueuesFindsDeadLetterTargets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	straight := e.queue("t-lstraight", nil)
	e.queue("t-lsrc", amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": straight})
	viaDLX := e.queue("t-lviadlx", nil)
	plain := e.queue("t-lplain", nil)
	ch := e.channel()
	defer ch.Close()
	dlx := "t-ldlx-" + randomID()[:10]
	if err := ch.ExchangeDeclare(dlx, "fanout", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(viaDLX, "", dlx, false, nil); err != nil {
		t.Fatal(err)
	}
	e.queue("t-lsrc2", amqp.Table{"x-dead-letter-exchange": dlx})
	if err := ch.PublishWithContext(context.Background(), "", straight, false, false, amqp.Publishing{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	b := testBroker(t, Config{})
	want := map[string]bool{straight: true, viaDLX: true, plain: false}
	var qs []engine.QueueListing
	// The management API's list lags the broker by its statistics
	// interval: ask every half second, for up to 30 s.
	ok := poll(30*time.Second, 500*time.Millisecond, func() bool {
		var err error
		if qs, err = b.ListQueues(context.Background()); err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, q := range qs {
			if w, ok := want[q.Name]; ok {
				if q.DeadLetterTarget != w {
					return false
				}
				if q.Name == straight && q.Messages != 1 {
					return false
				}
				seen++
			}
		}
		return seen == len(want)
	})
	if !ok {
		t.Fatalf("ListQueues: %+v, want %v as dead-letter targets and 1 message in %s", pick(qs, want), want, straight)
	}
}

// poll calls cond every interval until it holds or within has passed.
func poll(within, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval) // the polling interval, not a synchronisation
	}
	return true
}

func pick(qs []engine.QueueListing, names map[string]bool) []engine.QueueListing {
	var out []engine.QueueListing
	for _, q := range qs {
		if _, ok := names[q.Name]; ok {
			out = append(out, q)
		}
	}
	return out
}

// TestQueueDepthsListsEveryQueueInOneCall: a queue holding three
// messages shows 3 and an empty one 0, from the queue list.
func TestQueueDepthsListsEveryQueueInOneCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	full := e.queue("t-dfull", nil)
	empty := e.queue("t-dempty", nil)
	ch := e.channel()
	defer ch.Close()
	for range 3 {
		if err := ch.PublishWithContext(context.Background(), "", full, false, false, amqp.Publishing{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	b := testBroker(t, Config{})
	var d map[string]int
	ok := poll(30*time.Second, 500*time.Millisecond, func() bool {
		var err error
		if d, err = b.QueueDepths(context.Background()); err != nil {
			t.Fatal(err)
		}
		n, listed := d[empty]
		return d[full] == 3 && listed && n == 0
	})
	if !ok {
		t.Fatalf("depths of %s and %s = %d, %d; want 3 and 0", full, empty, d[full], d[empty])
	}
}
