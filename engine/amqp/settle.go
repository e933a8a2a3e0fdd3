package amqp

import (
	"context"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// pendingReturns remembers, per queue, how many messages this Broker has
// returned since it last read the queue. Quorum queues apply returns
// asynchronously (100,000 returns took 3–5 s to show on RabbitMQ 3.10), so
// the next read of the queue waits for them instead of reading a queue that
// looks shorter than it is — which would miss messages and, on a quorum
// queue, rotate its order.
type pendingReturns struct {
	mu sync.Mutex
	n  map[string]int
}

// add records n messages returned to queue.
func (p *pendingReturns) add(queue string, n int) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = make(map[string]int)
	}
	p.n[queue] += n
}

// take returns and forgets the count recorded for queue.
func (p *pendingReturns) take(queue string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.n[queue]
	delete(p.n, queue)
	return n
}

// awaitReturns repeats the passive declare of queue on ch until its ready
// count shows the n messages returned earlier, the queue has a consumer (who
// may legitimately take them), SettleTimeout passes or ctx ends. It returns
// the last answer; the read then proceeds with whatever is there.
func (b *Broker) awaitReturns(ctx context.Context, ch *amqp.Channel, queue string, n int, q amqp.Queue) (amqp.Queue, error) {
	deadline := time.Now().Add(b.cfg.SettleTimeout)
	pause := 2 * time.Millisecond
	for q.Messages < n && q.Consumers == 0 && time.Now().Before(deadline) {
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return q, ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, 50*time.Millisecond)
		var err error
		if q, err = ch.QueueDeclarePassive(queue, false, false, false, false, nil); err != nil {
			return q, err
		}
	}
	return q, nil
}
