package testkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The reference programs benchmarks measure dlqbot against, in the same run
// and on the same messages: the least a client must do to read a queue, to
// move one exactly, and the broker's own mover (the management UI's "Move
// messages" shovel).

// ReferenceRead reads n messages of queue and gives them all back, doing
// nothing else: messages are held unacked (prefetch 65535, a new channel
// when one is full), the consumers are cancelled and drained, and each
// channel returns its messages with one Nack(0, multiple, requeue). It
// returns how many it read.
func ReferenceRead(conn *amqp.Connection, queue string, n int) (int, error) {
	const window = 65535
	type consumer struct {
		ch  *amqp.Channel
		tag string
		d   <-chan amqp.Delivery
	}
	var cs []consumer
	read := 0
	for read < n {
		ch, err := conn.Channel()
		if err != nil {
			return read, err
		}
		if err := ch.Qos(window, 0, false); err != nil {
			return read, err
		}
		tag := fmt.Sprintf("ref-%d", len(cs))
		d, err := ch.Consume(queue, tag, false, false, false, false, nil)
		if err != nil {
			return read, err
		}
		cs = append(cs, consumer{ch, tag, d})
		// A bound on the whole window, not a pause: a loaded broker pauses
		// for seconds, and a window of 65,535 can take minutes there.
		idle := time.NewTimer(10 * time.Minute)
		for k := 0; k < window && read < n; k++ {
			select {
			case <-d:
				read++
			case <-idle.C:
				return read, fmt.Errorf("testkit: reference read: window not delivered within 10m")
			}
		}
		idle.Stop()
	}
	for _, c := range cs {
		if err := c.ch.Cancel(c.tag, false); err != nil {
			return read, err
		}
	}
	for _, c := range cs {
		for range c.d {
		}
	}
	for _, c := range cs {
		if err := c.ch.Nack(0, true, true); err != nil {
			return read, err
		}
		if err := c.ch.Close(); err != nil {
			return read, err
		}
	}
	return read, nil
}

// ReplayHeaders are the three headers a replay must add to each copy; the
// minimal mover writes them when asked, since headers cost the broker and
// the client whoever writes them.
func ReplayHeaders(src string) amqp.Table {
	return amqp.Table{"x-replay-id": "r_x", "x-replay-count": int32(1), "stroma.dlq.replayed_from": src}
}

// MinimalMove is the reference mover: a consumer on src, each delivery
// published to dst through the default exchange with confirms, window
// copies in flight, and each original acked once its copy is confirmed. It
// moves n messages unchanged, or with headers instead of theirs when
// headers is not nil.
func MinimalMove(ctx context.Context, conn *amqp.Connection, src, dst string, n, window int, headers amqp.Table) error {
	in, err := conn.Channel()
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := conn.Channel()
	if err != nil {
		return err
	}
	defer out.Close()
	if err := out.Confirm(false); err != nil {
		return err
	}
	if err := in.Qos(2*window, 0, false); err != nil {
		return err
	}
	ds, err := in.Consume(src, "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	type inFlight struct {
		tag uint64
		dc  *amqp.DeferredConfirmation
	}
	var flight []inFlight
	settle := func(f inFlight) error {
		ok, err := f.dc.WaitContext(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("testkit: minimal move: publish nacked")
		}
		return in.Ack(f.tag, false)
	}
	for moved := 0; moved < n; moved++ {
		var d amqp.Delivery
		select {
		case d = <-ds:
		case <-ctx.Done():
			return ctx.Err()
		}
		h := d.Headers
		if headers != nil {
			h = headers
		}
		dc, err := out.PublishWithDeferredConfirmWithContext(ctx, "", dst, true, false, amqp.Publishing{
			Headers: h, ContentType: d.ContentType, DeliveryMode: d.DeliveryMode, MessageId: d.MessageId, Body: d.Body})
		if err != nil {
			return err
		}
		flight = append(flight, inFlight{d.DeliveryTag, dc})
		if len(flight) >= window {
			if err := settle(flight[0]); err != nil {
				return err
			}
			flight = flight[1:]
		}
	}
	for _, f := range flight {
		if err := settle(f); err != nil {
			return err
		}
	}
	return nil
}

// Shovel moves every message of src to dst with a dynamic shovel, as the
// management UI's "Move messages" does (ack on confirm, deleted after the
// queue's length at start), and waits until the shovel has deleted itself
// and src holds nothing ready. It needs the rabbitmq_shovel plugin.
func (b Broker) Shovel(ctx context.Context, src, dst string) error {
	name := Name("shovel")
	path := "/api/parameters/shovel/%2F/" + url.PathEscape(name)
	body, _ := json.Marshal(map[string]any{"value": map[string]any{
		"src-protocol": "amqp091", "src-uri": "amqp://", "src-queue": src,
		"dest-protocol": "amqp091", "dest-uri": "amqp://", "dest-queue": dst,
		"src-delete-after": "queue-length", "ack-mode": "on-confirm",
	}})
	if err := b.mgmt(http.MethodPut, path, body); err != nil {
		return fmt.Errorf("testkit: create shovel (is rabbitmq_shovel enabled?): %w", err)
	}
	defer func() { _ = b.mgmt(http.MethodDelete, path, nil) }()
	conn, err := amqp.Dial(b.AMQPURL)
	if err != nil {
		return err
	}
	defer conn.Close()
	for {
		gone := errors.Is(b.mgmt(http.MethodGet, path, nil), errNotFound)
		if gone {
			ready, err := readyCount(conn, src)
			if err != nil {
				return err
			}
			if ready == 0 {
				return nil
			}
			return fmt.Errorf("testkit: shovel finished with %d message(s) left in %s", ready, src)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testkit: shovel %s to %s: %w", src, dst, ctx.Err())
		case <-time.After(5 * time.Millisecond): // polling interval
		}
	}
}

func readyCount(conn *amqp.Connection, queue string) (int, error) {
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	return q.Messages, err
}
