package amqp

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/internal/testkit"
)

// pollSeen is one answer a countPoll's stop function saw.
type pollSeen struct {
	q            amqp.Queue
	waited, flat time.Duration
}

// TestCountPollFollowsTheBrokersCounts drives a poll from its stop
// function on a quorum queue of each broker: a count rising one message per
// answer keeps the stall clock reset, the poll returns the answer that
// satisfied it, waits out a flat count for the stall rule, and ends on ctx
// or a failed declare.
func TestCountPollFollowsTheBrokersCounts(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		e := newEnvOn(t, on)
		queue := e.queue("countpoll", amqp.Table{"x-queue-type": "quorum"})
		ch := e.channel()
		defer ch.Close()
		ctx := context.Background()
		first, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}

		// Rising: each answer below 5 publishes one more message.
		var seen []pollSeen
		q, err := countPoll{first: time.Millisecond, most: 20 * time.Millisecond, stop: func(q amqp.Queue, waited, flat time.Duration) bool {
			seen = append(seen, pollSeen{q, waited, flat})
			if q.Messages < 5 {
				e.publish(queue, testMessages(1))
			}
			return q.Messages >= 5 || waited > 30*time.Second
		}}.run(ctx, ch, queue, first)
		if err != nil || q.Messages != 5 {
			t.Fatalf("rising poll ended with %d messages, %v; want 5", q.Messages, err)
		}
		last := seen[len(seen)-1]
		if last.flat >= last.waited {
			t.Fatalf("the count rose to %d but the stall clock ran from the start: %+v", last.q.Messages, last)
		}

		// Flat: the count stays at 5, so only the stall rule ends the poll.
		stall := 150 * time.Millisecond
		start := time.Now()
		calls := 0
		q, err = countPoll{first: time.Millisecond, most: 20 * time.Millisecond, stop: func(q amqp.Queue, waited, flat time.Duration) bool {
			calls++
			return flat > stall || waited > 30*time.Second
		}}.run(ctx, ch, queue, q)
		if err != nil || q.Messages != 5 {
			t.Fatalf("flat poll: %d messages, %v", q.Messages, err)
		}
		if d := time.Since(start); d < stall || d > 20*time.Second || calls < 2 {
			t.Fatalf("flat poll returned after %v and %d answers; want the %v stall rule to end it", d, calls, stall)
		}

		// ctx ends a poll that would never stop on its own.
		cctx, cancel := context.WithCancel(ctx)
		_, err = countPoll{first: time.Millisecond, most: 5 * time.Millisecond, stop: func(amqp.Queue, time.Duration, time.Duration) bool {
			cancel()
			return false
		}}.run(cctx, ch, queue, q)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled poll: %v", err)
		}

		// A failed declare ends the poll, named and still an AMQP 404.
		e.readAll(queue)
		del := e.channel()
		if _, err := del.QueueDelete(queue, false, false, false); err != nil {
			t.Fatal(err)
		}
		del.Close()
		_, err = countPoll{first: time.Millisecond, most: 5 * time.Millisecond, what: "wait for test",
			stop: func(amqp.Queue, time.Duration, time.Duration) bool { return false }}.run(ctx, ch, queue, q)
		if !isNotFound(err) || !strings.HasPrefix(err.Error(), "wait for test: ") {
			t.Fatalf("poll of a deleted queue: %v", err)
		}
	})
}
