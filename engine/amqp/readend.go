package amqp

import (
	"context"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
)

// A read knows it has seen the whole queue by counting, never by a pause:
// it reads the messages ready when it began (want), however long the
// broker takes to deliver them (a classic queue paging a million messages
// in from disk pauses for seconds). Only when the broker itself says that
// nothing is ready any more — twice, with no delivery in between — does a
// read end before want: another client holds or took the rest, and the
// read is short.

// emptyProbes is how many passive declares in a row must find the queue
// without ready messages (and no delivery arrive in between) before a read
// ends short: a delivery can still be on the wire when the first answers.
const emptyProbes = 2

// lonelyGrace is the least time a read of a classic queue waits, with
// nothing ready and no other consumer, before it ends short (see wait).
const lonelyGrace = 2 * time.Second

// wait blocks for c's next delivery. Every r.idle without one it asks the
// broker for the queue's ready count: while messages are ready, or none are
// but only this read consumes the queue (the broker is slow, not done), it
// waits on, up to r.stall in all; when none are ready and another consumer
// is on the queue, the read ends short with errReadDone. ctx ends the wait
// with its error.
//
// A classic queue with nothing ready and no other consumer has handed out
// every message it holds: what this read still expects is either on its
// way to it or was taken since the read counted it — acked by another
// client (a replay's move), or held by one whose consumer is gone. A fence
// on c tells which: once a synchronous method on c is answered, every
// delivery the broker made to c before it is in this process. So after
// emptyProbes fenced probes with no delivery, and lonelyGrace, the read
// ends short instead of holding everything it read for r.stall (a preview
// beside a replay held the replay's picks for 2 minutes that way). A
// quorum queue (or a queue of unknown type) is waited for as before: its
// state counts messages handed out while their deliveries are still to be
// sent (3.10 pauses for seconds so).
func (r *holdReader) wait(ctx context.Context, c *heldChan) (amqp.Delivery, bool, error) {
	start := time.Now()
	empty := 0
	var lonely time.Time // when a classic queue was first seen with nothing for this read
	for {
		if r.timer == nil {
			r.timer = time.NewTimer(r.idle)
		} else {
			r.timer.Reset(r.idle)
		}
		select {
		case d, ok := <-c.deliveries:
			r.timer.Stop()
			return d, ok, nil
		case <-ctx.Done():
			r.timer.Stop()
			r.cut = true
			return amqp.Delivery{}, false, ctx.Err()
		case <-r.timer.C:
		}
		ready, consumers, err := r.readyNow()
		if err != nil {
			r.cut = true
			return amqp.Delivery{}, false, err
		}
		// Nothing ready while no one but this read consumes the queue: the
		// broker has handed the rest to this read's own channels and they
		// are still on their way (a slow quorum queue on 3.10 pauses for
		// seconds with every message already out), so that is no end.
		// Which consumers are this read's own is counted as the broker
		// counts them (see counted).
		if ready == 0 && consumers <= r.counted() && r.classic {
			if err := c.ch.Qos(c.window, 0, false); err != nil { // the fence: see above
				r.cut = true
				return amqp.Delivery{}, false, r.b.classify(err)
			}
			if lonely.IsZero() {
				lonely = time.Now()
			}
			if empty++; empty <= emptyProbes || time.Since(lonely) < lonelyGrace {
				continue
			}
			r.short, r.done = true, true
			return amqp.Delivery{}, false, errReadDone
		}
		if ready > 0 || consumers <= r.counted() {
			empty, lonely = 0, time.Time{}
			if time.Since(start) < r.stall {
				continue
			}
		} else if empty++; empty < emptyProbes {
			continue
		}
		// Nothing left for this read (or the broker stopped delivering
		// what it says is ready): it saw less than the queue held.
		r.short, r.done = true, true
		return amqp.Delivery{}, false, errReadDone
	}
}

// readyNow is the queue's ready count and consumer count from a passive
// declare on the reader's probe channel (opened on first use).
func (r *holdReader) readyNow() (ready, consumers int, err error) {
	if r.probe == nil || r.probe.IsClosed() {
		ch, err := r.conn.Channel()
		if err != nil {
			return 0, 0, r.b.classify(err)
		}
		r.probe = ch
	}
	q, err := r.probe.QueueDeclarePassive(r.queue, false, false, false, false, nil)
	if err != nil {
		return 0, 0, r.b.classify(err)
	}
	return q.Messages, q.Consumers, nil
}

// counted is how many of the queue's consumers, as the broker counts
// them, may be this read's own: its consumers on the queue and — unless
// the queue is classic — its cancelled consumers on open channels too. A
// quorum queue keeps a cancelled consumer, and counts it, until the
// deliveries it holds are settled (measured on 3.10: ready 0 and 2
// consumers while the second window, checked out to this read, was still
// on its way; the read took its own first window's consumer for another
// reader and called 10,000 of 20,000 "held elsewhere"). Overcounting only
// delays the end of a read that another consumer has emptied, up to the
// stall timeout, after which it still ends short.
func (r *holdReader) counted() int {
	n := 0
	for _, c := range r.chans {
		if c.ch.IsClosed() {
			continue
		}
		if !c.cancelled || !r.classic {
			n++
		}
	}
	return n
}

// coverage says how much of the queue the read saw. heldUnacked is the
// management API's unacknowledged count for the queue before the read
// (−1 when unknown); it lags by a statistics interval, so it is believed
// only when the broker's exact counts already show another holder.
func (r *holdReader) coverage(heldUnacked int) engine.Coverage {
	cv := engine.Coverage{Read: r.seq, Ready: r.want, OtherConsumers: r.others, Short: r.short, Cut: r.cut}
	if !r.done && r.seq < r.want {
		cv.Cut = true // ended by its caller (a limit, a satisfied move)
	}
	if r.short {
		cv.HeldElsewhere = r.want - r.seq
	}
	if r.others > 0 && heldUnacked > 0 {
		// Held by others before the read began: not in its ready count.
		cv.HeldElsewhere += heldUnacked
		cv.Queued = r.want + heldUnacked
	} else {
		cv.Queued = r.want
	}
	if r.landing > 0 {
		// Given back by an earlier read and not landed yet: not in its
		// ready count either.
		cv.HeldElsewhere += r.landing
		cv.Queued += r.landing
	}
	return cv
}

// awaitQuiet repeats the passive declare of queue on ch while the broker
// counts consumers on it, before a read: another reader holding messages
// (a preview, another replica's move), or — on a quorum queue — a
// cancelled consumer whose requeues the queue has not applied yet (another
// process's read a moment ago). Those messages would be invisible to the
// read. It waits while the ready count rises (requeues landing), up to
// SettleTimeout, and otherwise QuietWait; a consumer that stays (one that
// lives on the queue) only delays the read by QuietWait, which then
// reports the other consumer in its coverage.
func (b *Broker) awaitQuiet(ctx context.Context, ch *amqp.Channel, queue string, q amqp.Queue) (amqp.Queue, error) {
	return countPoll{
		first: 5 * time.Millisecond, most: 100 * time.Millisecond, what: "wait for other readers",
		stop: func(q amqp.Queue, waited, flat time.Duration) bool {
			return q.Consumers == 0 || waited > b.cfg.SettleTimeout || (waited > b.cfg.QuietWait && flat > requeueStall)
		},
	}.run(ctx, ch, queue, q)
}
