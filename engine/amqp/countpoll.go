package amqp

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// requeueStall is how long a count poll waits on once the queue's ready
// count has stopped rising: requeues landing raise it steadily, so a count
// that stays flat means the rest left meanwhile (consumed, moved) or will
// not come.
const requeueStall = time.Second

// countPoll waits on a queue's counts as the broker reports them: it
// repeats the passive declare of the queue, with pauses doubling from first
// up to most, until stop says so or ctx ends. Both waits before a read use
// it: for this Broker's earlier requeues to show (awaitRequeues) and for
// other readers to let go (awaitQuiet).
type countPoll struct {
	// first and most bound the pause between two declares.
	first, most time.Duration
	// stop is asked before each pause with the latest answer, how long
	// the poll has run and how long the ready count has not risen.
	stop func(q amqp.Queue, waited, flat time.Duration) bool
	// what names the wait in a failed declare's error; empty leaves the
	// error as the broker gave it.
	what string
}

// run polls queue on ch, starting from the answer q already in hand, and
// returns the last answer. ctx ends the poll with its error.
func (p countPoll) run(ctx context.Context, ch *amqp.Channel, queue string, q amqp.Queue) (amqp.Queue, error) {
	start := time.Now()
	pause := p.first
	last, rose := q.Messages, start
	for {
		if q.Messages > last {
			last, rose = q.Messages, time.Now()
		}
		if p.stop(q, time.Since(start), time.Since(rose)) {
			return q, nil
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return q, ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, p.most)
		var err error
		if q, err = ch.QueueDeclarePassive(queue, false, false, false, false, nil); err != nil {
			if p.what != "" {
				err = fmt.Errorf("%s: %w", p.what, err)
			}
			return q, err
		}
	}
}
