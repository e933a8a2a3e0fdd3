package amqp

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
)

// DrainTap reads the messages in dlq's tap and hands them to record in
// batches of up to 500, acknowledging each batch (one multiple ack) once
// record returned nil; an error from record gives the batch and every
// later delivery back. It returns when the tap's ready count is zero after
// a quiet moment with no delivery. A missing tap is
// engine.ErrQueueNotFound. Other workers draining the same tap compete for its messages; each is recorded by one of them.
func (b *Broker) DrainTap(ctx context.Context, dlq string, record func([]engine.Message) error) (int, error) {
	tap := TapName(dlq)
	ch, err := b.channel(ctx)
	if err != nil {
		return 0, fmt.Errorf("amqp: drain tap %s: %w", tap, err)
	}
	defer closeQuietly(ch)
	q, err := ch.QueueDeclarePassive(tap, true, false, false, false, nil)
	if isNotFound(err) {
		return 0, fmt.Errorf("amqp: drain tap %s: %w", tap, engine.ErrQueueNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("amqp: drain tap %s: %w", tap, b.classify(err))
	}
	if q.Messages == 0 {
		return 0, nil
	}
	if err := ch.Qos(2*tapBatch, 0, false); err != nil {
		return 0, fmt.Errorf("amqp: drain tap %s: qos: %w", tap, b.classify(err))
	}
	// A tap deleted while it is drained cancels the consumer: the drain
	// then reports it missing, not a lost channel.
	cancelled := ch.NotifyCancel(make(chan string, 1))
	tag := "dlqbot-tap-" + randomID()
	ds, err := ch.Consume(tap, tag, false, false, false, false, nil)
	if err != nil {
		return 0, fmt.Errorf("amqp: drain tap %s: consume: %w", tap, b.classify(err))
	}
	d := &tapDrain{b: b, ch: ch, tap: tap, tag: tag, ds: ds, record: record}
	quiet := time.NewTimer(tapQuiet)
	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			d.giveBack()
			return d.total, ctx.Err()
		case m, ok := <-ds:
			if !ok {
				select {
				case <-cancelled:
					return d.total, fmt.Errorf("amqp: drain tap %s: the broker cancelled its consumer (the tap was deleted): %w", tap, engine.ErrQueueNotFound)
				default:
				}
				return d.total, fmt.Errorf("amqp: drain tap %s: %w", tap, unavailable("node "+b.conns.node(), errors.New("channel closed")))
			}
			d.batch = append(d.batch, m)
			if len(d.batch) >= tapBatch {
				if err := d.flush(); err != nil {
					d.giveBack()
					return d.total, fmt.Errorf("amqp: drain tap %s: %w", tap, err)
				}
			}
			resetTimer(quiet, tapQuiet)
		case <-quiet.C:
			if done, err := d.quiet(); done || err != nil {
				return d.total, err
			}
			quiet.Reset(tapQuiet)
		}
	}
}

// tapDrain is one DrainTap's consumer on tap (tag, delivering ds on ch),
// the batch it has received and not recorded yet, and how many messages
// it recorded (total).
type tapDrain struct {
	b        *Broker
	ch       *amqp.Channel
	tap, tag string
	ds       <-chan amqp.Delivery
	record   func([]engine.Message) error
	batch    []amqp.Delivery
	total    int
}

// giveBack cancels the consumer and gives back (requeues) the batch and
// every delivery in flight.
func (d *tapDrain) giveBack() {
	if d.ch.Cancel(d.tag, false) == nil {
		for m := range d.ds { // drain what was in flight; the nack below gives it back
			d.batch = append(d.batch, m)
		}
	}
	if len(d.batch) > 0 {
		_ = d.batch[len(d.batch)-1].Nack(true, true)
	}
}

// flush records the batch and acknowledges it (one multiple ack).
func (d *tapDrain) flush() error {
	if len(d.batch) == 0 {
		return nil
	}
	if err := d.record(tapMessages(d.batch)); err != nil {
		return err
	}
	if err := d.batch[len(d.batch)-1].Ack(true); err != nil {
		return d.b.classify(err)
	}
	d.total += len(d.batch)
	d.batch = d.batch[:0]
	return nil
}

// quiet flushes the batch after a quiet moment with no delivery; done is
// true when the tap's ready count is then zero (and what was already on
// its way is recorded too) or the drain failed (err).
func (d *tapDrain) quiet() (done bool, err error) {
	if err := d.flush(); err != nil {
		d.giveBack()
		return true, fmt.Errorf("amqp: drain tap %s: %w", d.tap, err)
	}
	q, err := d.ch.QueueDeclarePassive(d.tap, true, false, false, false, nil)
	if err != nil {
		return true, fmt.Errorf("amqp: drain tap %s: %w", d.tap, d.b.classify(err))
	}
	if q.Messages > 0 {
		return false, nil
	}
	// Deliveries already on their way to this consumer are not in the
	// ready count: record them too.
	_ = d.ch.Cancel(d.tag, false)
	for m := range d.ds {
		d.batch = append(d.batch, m)
	}
	if err := d.flush(); err != nil {
		d.giveBack()
		return true, fmt.Errorf("amqp: drain tap %s: %w", d.tap, err)
	}
	return true, nil
}

// tapMessages are the tap's deliveries in batch as the engine reads them.
func tapMessages(batch []amqp.Delivery) []engine.Message {
	msgs := make([]engine.Message, len(batch))
	for i, d := range batch {
		msgs[i] = engine.Message{Seq: i, Headers: fromTable(d.Headers), MessageID: d.MessageId,
			Timestamp: d.Timestamp, ContentType: d.ContentType, Body: d.Body, Redelivered: d.Redelivered}
	}
	return msgs
}
