package amqp

import (
	"sync"
	"sync/atomic"
)

// deliveryCounts counts, by queue, the deliveries this Broker's reads
// (Scan, Move, cursors) received from RabbitMQ, each as it arrived on the
// channel: those handed to the caller and those that arrived after the
// read ended, acked or given back alike.
type deliveryCounts struct {
	m sync.Map // queue → *atomic.Int64
}

// of is queue's counter.
func (d *deliveryCounts) of(queue string) *atomic.Int64 {
	if c, ok := d.m.Load(queue); ok {
		return c.(*atomic.Int64)
	}
	c, _ := d.m.LoadOrStore(queue, new(atomic.Int64))
	return c.(*atomic.Int64)
}

// Delivered is how many deliveries this Broker's reads have received from
// queue since it was made: what RabbitMQ handed to dlqbot, counted where
// it arrives. The management API's deliver_get counts the same on the
// broker's side, but from sampled channel statistics, which can lose a
// closed channel's last counts; this count cannot.
func (b *Broker) Delivered(queue string) int64 { return b.delivered.of(queue).Load() }

// DeliveredByQueue is Delivered for every queue this Broker has read.
func (b *Broker) DeliveredByQueue() map[string]int64 {
	out := map[string]int64{}
	b.delivered.m.Range(func(q, c any) bool {
		out[q.(string)] = c.(*atomic.Int64).Load()
		return true
	})
	return out
}
