package amqp

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.TailCursor = (*Cursor)(nil)

// A cursor whose read has ended keeps consuming the DLQ's tail: whatever
// arrives behind the messages it read (copies that came back, new dead
// letters, messages another client gave back) is delivered to a tail
// consumer of its own, held unacked like everything else it read, and
// handed to the caller of Arrivals once. Release gives the tail back last,
// after every window, so the DLQ keeps its order.
//
// Arrivals knows it has seen every arrival up to the call by the broker's
// own counts, never by a pause: while no other consumer is on the DLQ, a
// ready count of 0 means everything in it was delivered to this read; the
// tail consumer is then cancelled, and its delivery stream, which the
// client closes only after every delivery that preceded the cancel-ok,
// drained to its end. The next call starts a new tail consumer.

// tailPoll bounds the wait between two looks at the DLQ's ready count while
// arrivals are still on their way to the tail consumer.
const tailPoll = 50 * time.Millisecond

// Arrivals calls visit with every message that arrived at the DLQ behind
// the cursor's read and that no earlier call saw, in the order the broker
// delivered them (engine.TailCursor). The read must have ended (Done). It
// returns an error wrapping engine.ErrHeldElsewhere when the read could
// not see every arrival: it ended short, or another consumer is on the
// DLQ; after any other error the cursor is released.
func (c *Cursor) Arrivals(ctx context.Context, visit func(engine.Message)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.r
	if r.closed {
		return fmt.Errorf("amqp: arrivals on %s: the cursor was released", r.queue) // nothing left to release
	}
	if r.short || r.others > 0 || r.landing > 0 {
		return fmt.Errorf("amqp: arrivals on %s: the read did not see the whole queue: %w", r.queue, engine.ErrHeldElsewhere)
	}
	if r.seq < r.want {
		// Not ended, or ended by the read budget: what it holds beyond
		// its last delivery is no arrival.
		return c.tailErr(fmt.Errorf("the read has not seen every message ready when it began"))
	}
	see := func(ch *heldChan, d amqp.Delivery, drained bool) {
		if drained {
			ch.drained++
		} else {
			ch.got++
		}
		r.arrived++
		r.delivered.Add(1)
		visit(toMessage(held{seq: r.want + r.arrived - 1, d: d, c: ch}))
	}
	// A window consumer still open receives arrivals as moves free room in
	// it: cancel it, and take what it got.
	for _, ch := range r.chans {
		if ch.cancelled || ch.tail {
			continue
		}
		if err := r.fenceTail(ch, see); err != nil {
			return c.tailErr(err)
		}
	}
	return c.tailToRest(ctx, see)
}

// tailToRest takes what arrives at the DLQ with a tail consumer until the
// DLQ is at rest — no message ready that the tail has not taken — and then
// cancels the consumer, so that between two calls the cursor takes
// nothing more. Another consumer on the DLQ (which takes arrivals the tail
// cannot see) ends it as well, with engine.ErrHeldElsewhere.
func (c *Cursor) tailToRest(ctx context.Context, see func(*heldChan, amqp.Delivery, bool)) error {
	r := c.r
	deadline := time.Now().Add(r.stall)
	for {
		t, err := r.tailChan(see)
		if err != nil {
			return c.tailErr(err)
		}
		for more := true; more; {
			select {
			case d, ok := <-t.deliveries:
				if !ok {
					return c.tailErr(r.lost(t))
				}
				see(t, d, false)
			default:
				more = false
			}
		}
		ready, consumers, err := r.readyNow()
		if err != nil {
			return c.tailErr(err)
		}
		if consumers > r.counted() {
			if err := r.fenceTail(t, see); err != nil {
				return c.tailErr(err)
			}
			return fmt.Errorf("amqp: arrivals on %s: another consumer is on the queue: %w", r.queue, engine.ErrHeldElsewhere)
		}
		if ready == 0 {
			// Everything in the DLQ is this read's: take the rest of what
			// the tail got.
			if err := r.fenceTail(t, see); err != nil {
				return c.tailErr(err)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return c.tailErr(fmt.Errorf("%d ready messages were not delivered within %s", ready, r.stall))
		}
		timer := time.NewTimer(tailPoll)
		select {
		case <-ctx.Done():
			timer.Stop()
			return c.tailErr(ctx.Err())
		case d, ok := <-t.deliveries:
			timer.Stop()
			if !ok {
				return c.tailErr(r.lost(t))
			}
			see(t, d, false)
		case <-timer.C:
		}
	}
}

// tailErr releases the cursor after a failed look at its tail (what it
// holds may be gone with a lost channel) and wraps err.
func (c *Cursor) tailErr(err error) error {
	_, _ = c.releaseLocked()
	return fmt.Errorf("amqp: arrivals on %s: %w", c.r.queue, err)
}

// tailChan is the tail consumer's channel, opened when there is none or
// the last one is cancelled or full (the broker delivers nothing beyond
// a full prefetch window).
func (r *holdReader) tailChan(see func(*heldChan, amqp.Delivery, bool)) (*heldChan, error) {
	if n := len(r.chans); n > 0 {
		if t := r.chans[n-1]; t.tail && !t.cancelled && t.got < t.window {
			return t, nil
		}
		if t := r.chans[n-1]; t.tail && !t.cancelled {
			if err := r.fenceTail(t, see); err != nil {
				return nil, err
			}
		}
	}
	ch, err := r.conn.Channel()
	if err != nil {
		return nil, r.b.classify(err)
	}
	t := &heldChan{
		queue:  r.queue,
		ch:     ch,
		tag:    fmt.Sprintf("dlqbot-%s-tail-%d", r.id, len(r.chans)),
		window: MaxPrefetch,
		from:   r.want,
		tail:   true,
		closes: ch.NotifyClose(make(chan *amqp.Error, 1)),
	}
	if err := ch.Qos(t.window, 0, false); err != nil {
		closeQuietly(ch)
		return nil, r.b.classify(err)
	}
	d, err := ch.Consume(r.queue, t.tag, false, false, false, false, nil)
	if err != nil {
		closeQuietly(ch)
		return nil, r.b.classify(err)
	}
	t.deliveries = d
	r.chans = append(r.chans, t)
	return t, nil
}

// fenceTail cancels ch's consumer and hands every delivery it still had to
// see (drained, for a window's channel: beyond what the read took from it,
// every one is an arrival). The client closes
// the delivery stream once every delivery sent before the cancel-ok went
// through it.
func (r *holdReader) fenceTail(ch *heldChan, see func(*heldChan, amqp.Delivery, bool)) error {
	if err := ch.ch.Cancel(ch.tag, false); err != nil {
		return r.b.classify(err)
	}
	ch.cancelled = true
	timer := time.NewTimer(drainTimeout)
	defer timer.Stop()
	for {
		select {
		case d, ok := <-ch.deliveries:
			if !ok {
				return nil
			}
			see(ch, d, !ch.tail)
		case <-timer.C:
			return fmt.Errorf("the consumer's deliveries did not end within %s of its cancel", drainTimeout)
		}
	}
}
