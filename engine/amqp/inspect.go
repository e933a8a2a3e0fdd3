package amqp

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
)

// Inspect reports whether queue exists, its ready count and consumers (a
// passive declare: exact and current), and its type, effective delivery
// limit and read budget (from the management API and the read marks; left
// empty when the API cannot be reached, which is not an error). A missing queue is Exists=false and a nil error;
// an unreachable broker is engine.ErrBrokerUnavailable.
func (b *Broker) Inspect(ctx context.Context, queue string) (engine.QueueInfo, error) {
	st := engine.QueueInfo{Name: queue}
	q, found, err := b.declarePassive(ctx, queue)
	if err != nil {
		return st, fmt.Errorf("amqp: inspect %s: %w", queue, err)
	}
	if !found {
		return st, nil
	}
	st.Exists, st.Ready, st.Consumers = true, q.Messages, q.Consumers
	if info, err := b.queueInfo(ctx, queue); err == nil {
		st.Type = info.queueType()
		// The read budget: the effective limit, where it comes from and
		// what the last read left. A store that cannot be read is an error:
		// the budget would be unknown. A broker version that cannot be
		// read leaves the budget empty, as an unreachable API does: the
		// read itself refuses (startRead).
		st.DeliveryLimit, st.ReadCounts, err = b.readCounts(ctx, info)
		if errors.Is(err, engine.ErrBudgetUnknown) {
			st.DeliveryLimit, st.ReadCounts = 0, engine.ReadCounts{}
		} else if err != nil {
			return st, fmt.Errorf("amqp: inspect %s: read marks: %w", queue, err)
		}
	}
	return st, nil
}

// Look is Inspect by a passive declare alone (engine.Broker).
func (b *Broker) Look(ctx context.Context, queue string) (engine.QueueInfo, error) {
	st := engine.QueueInfo{Name: queue}
	q, found, err := b.declarePassive(ctx, queue)
	if err != nil {
		return st, fmt.Errorf("amqp: look at %s: %w", queue, err)
	}
	st.Exists = found
	if found {
		st.Ready, st.Consumers = q.Messages, q.Consumers
	}
	return st, nil
}

// declarePassive probes queue on a throwaway channel: a missing queue
// makes the broker close that channel (404), never the connection. A
// ready count that shows this Broker's earlier requeues landed ends the
// next read's wait for them (pendingRequeues.landed).
func (b *Broker) declarePassive(ctx context.Context, queue string) (amqp.Queue, bool, error) {
	ch, err := b.channel(ctx)
	if err != nil {
		return amqp.Queue{}, false, err
	}
	defer closeQuietly(ch)
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if isNotFound(err) {
		return amqp.Queue{}, false, nil
	}
	if err != nil {
		return amqp.Queue{}, false, b.classify(err)
	}
	b.pending.landed(queue, q.Messages)
	return q, true, nil
}
