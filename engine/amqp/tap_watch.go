package amqp

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
)

// watchPrefetch bounds what the watching consumer holds unrecorded.
const watchPrefetch = 100

// WatchTap consumes dlq's tap and records what arrives at once (each
// batch is every delivery already received, acknowledged with one
// multiple ack once record returned nil), until ctx ends. The broker
// cancels a consumer whose queue is deleted (basic.cancel, which
// amqp091-go reports through Channel.NotifyCancel): the watch then
// returns engine.ErrQueueNotFound at once, as it does when the tap is
// missing to begin with (a failed passive declare). Deliveries not
// recorded are given back (requeued) when the watch ends.
func (b *Broker) WatchTap(ctx context.Context, dlq string, record func([]engine.Message) error) error {
	tap := TapName(dlq)
	ch, err := b.channel(ctx)
	if err != nil {
		return fmt.Errorf("amqp: watch tap %s: %w", tap, err)
	}
	defer closeQuietly(ch)
	if _, err := ch.QueueDeclarePassive(tap, true, false, false, false, nil); err != nil {
		return fmt.Errorf("amqp: watch tap %s: %w", tap, b.classify(err))
	}
	if err := ch.Qos(watchPrefetch, 0, false); err != nil {
		return fmt.Errorf("amqp: watch tap %s: qos: %w", tap, b.classify(err))
	}
	// Buffered: amqp091-go blocks its reader on an unread notification.
	cancelled := ch.NotifyCancel(make(chan string, 1))
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	tag := "dlqbot-tapwatch-" + randomID()
	ds, err := ch.Consume(tap, tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("amqp: watch tap %s: consume: %w", tap, b.classify(err))
	}
	gone := func() error {
		return fmt.Errorf("amqp: watch tap %s: the broker cancelled its consumer (the tap was deleted): %w", tap, engine.ErrQueueNotFound)
	}
	var batch []amqp.Delivery
	giveBack := func() {
		if len(batch) > 0 {
			_ = batch[len(batch)-1].Nack(true, true)
			batch = batch[:0]
		}
	}
	for {
		select {
		case <-ctx.Done():
			_ = ch.Cancel(tag, false)
			for d := range ds { // in flight: given back below with the rest
				batch = append(batch, d)
			}
			giveBack()
			return nil
		case <-cancelled:
			giveBack()
			return gone()
		case e := <-closed:
			if e != nil && e.Code == amqp.NotFound {
				return gone()
			}
			return fmt.Errorf("amqp: watch tap %s: %w", tap, unavailable("node "+b.conns.node(), errors.New("channel closed")))
		case d, ok := <-ds:
			if !ok {
				select {
				case <-cancelled:
					giveBack()
					return gone()
				default:
				}
				return fmt.Errorf("amqp: watch tap %s: %w", tap, unavailable("node "+b.conns.node(), errors.New("channel closed")))
			}
			batch = received(ds, append(batch[:0], d))
			if err := record(tapMessages(batch)); err != nil {
				giveBack()
				return fmt.Errorf("amqp: watch tap %s: record: %w", tap, err)
			}
			if err := batch[len(batch)-1].Ack(true); err != nil {
				return fmt.Errorf("amqp: watch tap %s: ack: %w", tap, b.classify(err))
			}
			batch = batch[:0]
		}
	}
}

// received adds to batch the deliveries ds already received, until it
// holds tapBatch.
func received(ds <-chan amqp.Delivery, batch []amqp.Delivery) []amqp.Delivery {
	for len(batch) < tapBatch {
		select {
		case d, ok := <-ds:
			if !ok {
				return batch
			}
			batch = append(batch, d)
		default:
			return batch
		}
	}
	return batch
}
