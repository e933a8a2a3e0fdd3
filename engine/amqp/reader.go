package amqp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// errReadDone ends a read: every message present when it began has been
// delivered, or the broker says none is left for this read (another client
// holds or took the rest: the read is short).
var errReadDone = errors.New("read done")

// drainTimeout bounds the wait for a cancelled consumer's last deliveries.
const drainTimeout = 10 * time.Second

// holdReader reads a queue in order and holds every delivery unacked until
// release. Each channel's consumer gets one prefetch window; the next
// channel's consumer starts only once the previous window is full (and its
// consumer cancelled), so the broker, which never delivers beyond a full
// window, hands out the queue in order, channel after channel. An ack frees
// room in the current window, which the broker fills with the next message
// on the same channel: order holds there too.
//
// Scan gives everything back; a Move acks the deliveries it has copied (ack)
// and gives the rest back, both through release. A holdReader is used by one
// goroutine.
type holdReader struct {
	b      *Broker
	conn   *amqp.Connection
	queue  string
	id     string        // consumer tag prefix
	want   int           // ready count when the read began
	window int           // prefetch per channel
	idle   time.Duration // ask the broker after this long without a delivery
	stall  time.Duration // give up after this long without a delivery while the broker says messages are ready
	spare  *amqp.Channel // the probe channel, reused for the first window
	probe  *amqp.Channel // passive declares while the read waits
	chans  []*heldChan
	seq    int
	copies int  // copies named (copyHeader), over every move of the read
	done   bool // errReadDone was returned
	timer  *time.Timer
	closed bool
	// others is how many consumers the queue had, besides this read, when
	// the read began (after waiting for them to let go, see awaitQuiet).
	others int
	// landing is how many messages an earlier read gave back that had not
	// shown in the ready count when this read began (see stillLanding): the
	// read cannot see them, so it is not a whole read.
	landing int
	// arrived is how many messages arrived behind the read and were
	// handed out by Arrivals (tail.go).
	arrived int
	// short is set when the read ended before it saw every message ready at
	// its start: the broker had none left for it (another client holds or
	// took them), or it stopped delivering for the stall timeout.
	short bool
	// cut is set when the read was ended early by its caller or an error.
	cut bool
	// paced makes release give messages back in small ordered steps (see
	// requeue.go); the caller sets it for quorum queues with a delivery
	// limit, which would otherwise scramble a large requeue.
	paced bool
	// budget is the read budget of a quorum queue (see budget.go).
	budget *readBudget
	// delivered counts the read's deliveries into the Broker's count of
	// the queue's (Broker.Delivered).
	delivered *atomic.Int64
	// classic is set when the management API said the queue is classic:
	// the broker then stops counting a consumer as soon as it is
	// cancelled. Any other queue (quorum, or a type not learnt) may still
	// count this read's cancelled consumers (see counted).
	classic bool
}

// heldChan is one channel of a holdReader and the deliveries it holds.
type heldChan struct {
	queue      string
	ch         *amqp.Channel
	tag        string
	deliveries <-chan amqp.Delivery
	closes     chan *amqp.Error
	window     int      // prefetch of this channel
	from       int      // the reader's seq when it opened
	got        int      // deliveries handed out by next
	drained    int      // deliveries that arrived after the read ended
	acked      int      // deliveries acked individually
	cancelled  bool     // consumer cancelled (by us, or by the broker)
	tail       bool     // a tail consumer's channel (tail.go): everything it got is an arrival
	ackedTags  []uint64 // delivery tags acked, for paced requeues
	// floor: every tag up to it is acked; above is tags acked above the
	// floor (individually, because a held delivery below them is not).
	floor uint64
	above map[uint64]bool
}

// held is one delivery held by a holdReader.
type held struct {
	seq int
	d   amqp.Delivery
	c   *heldChan
	// packed is d's headers, packed (pack.go), while a cursor keeps h for
	// a later move; d.Headers is then nil.
	packed []byte
}

// openReader probes queue with a passive declare and prepares a reader for
// the messages ready at that moment, after waiting for this Broker's
// earlier requeues to the queue to show (see pendingRequeues). A missing
// queue is engine.ErrQueueNotFound.
func (b *Broker) openReader(ctx context.Context, queue string) (*holdReader, error) {
	rb, err := b.startRead(ctx, queue)
	if err != nil {
		return nil, err
	}
	conn, ch, err := b.conns.channel(ctx)
	if err != nil {
		return nil, err
	}
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	landing := 0
	e := b.pending.take(queue)
	expecting := err == nil && e.count > q.Messages
	if expecting {
		q, err = b.awaitRequeues(ctx, ch, queue, e, q)
	}
	if err == nil && q.Consumers > 0 {
		q, err = b.awaitQuiet(ctx, ch, queue, q)
	}
	// What may still be on its way is judged on the ready count the read
	// starts from: requeues that landed while it waited for quiet are in
	// it (a 3.10 quorum queue applied 1,506 of 20,000 then, and a read of
	// all 20,000 called them held elsewhere too).
	if err == nil && expecting {
		landing = b.stillLanding(ctx, queue, e, q.Messages)
	}
	if err != nil {
		closeQuietly(ch)
		return nil, b.classify(err)
	}
	r := &holdReader{
		b: b, conn: conn, queue: queue, id: randomID(), others: q.Consumers, landing: landing,
		want: q.Messages, idle: b.cfg.IdleTimeout, stall: b.cfg.StallTimeout, spare: ch,
		delivered: b.delivered.of(queue),
	}
	budget := r.fitWindow(b.cfg.Prefetch)
	if chans := (r.want + r.window - 1) / r.window; chans > budget {
		closeQuietly(ch)
		return nil, fmt.Errorf("%d messages need %d channels of %d, more than the %d available", r.want, chans, r.window, budget)
	}
	r.budget = rb
	r.classic = b.info.knownClassic(queue) // learnt by startRead
	return r, nil
}

// fitWindow sets the read's prefetch per channel to prefetch, widened when
// the queue would need more than half the connection's channels (the other
// half is left to other operations), and returns that half. It is called
// before the first window opens.
func (r *holdReader) fitWindow(prefetch int) (budget int) {
	budget = int(r.conn.Config.ChannelMax) / 2
	if budget < 1 {
		budget = MaxPrefetch / 2
	}
	r.window = max(prefetch, min((r.want+budget-1)/budget, MaxPrefetch))
	return budget
}

// ackWindows is the most windows forAcks splits a read into. A classic
// queue puts each window given back in its place by walking the messages
// ready ahead of it (rabbit_variable_queue's queue_merge), and a read
// gives back from its head: each window walks every one given back before
// it, so a read's give-back costs the broker in proportion to the
// square of its size over the window (900 windows of 1,000 given back
// after a filtered replay of 1,000,000 took over four minutes to land).
const ackWindows = 100

// forAcks narrows the read's windows, before the first opens, for a
// cursor that acks what it holds out of order on a classic queue:
// Config.CursorPrefetch, or the read split into ackWindows when that is
// wider, never wider than Config.Prefetch. Other queues keep theirs: a
// quorum queue finds an ack by its id, and counts each cancelled
// consumer for a while (counted).
func (r *holdReader) forAcks() {
	if r.classic && len(r.chans) == 0 {
		cfg := r.b.cfg
		r.fitWindow(min(cfg.Prefetch, max(cfg.CursorPrefetch, (r.want+ackWindows-1)/ackWindows)))
	}
}

// next returns the next delivery in queue order, errReadDone once the
// messages present at the start have all been read (or the broker has none
// left for this read: see wait), or the error that broke the read.
func (r *holdReader) next(ctx context.Context) (held, error) {
	if r.done || r.seq >= r.want {
		r.done = true
		return held{}, errReadDone
	}
	var c *heldChan
	if n := len(r.chans); n > 0 {
		c = r.chans[n-1]
	}
	if c == nil || c.got-c.acked >= c.window {
		// The window is full: the broker sends this channel nothing more.
		// Cancel its consumer, so that acks on it (a Move) cannot open
		// room for more, and start the next window.
		if c != nil && !c.cancelled {
			if err := c.ch.Cancel(c.tag, false); err != nil {
				return held{}, r.b.classify(err)
			}
			c.cancelled = true
		}
		var err error
		if c, err = r.open(); err != nil {
			return held{}, err
		}
	}
	var d amqp.Delivery
	var ok bool
	select {
	case d, ok = <-c.deliveries:
	default:
		var err error
		if d, ok, err = r.wait(ctx, c); err != nil {
			return held{}, err
		}
	}
	if !ok {
		return held{}, r.lost(c)
	}
	c.got++
	r.delivered.Add(1)
	if err := r.budget.see(d); err != nil {
		r.done = true // held, and given back by release
		return held{}, err
	}
	h := held{seq: r.seq, d: d, c: c}
	r.seq++
	return h, nil
}

// open starts the consumer of the next window on a new channel.
func (r *holdReader) open() (*heldChan, error) {
	ch := r.spare
	r.spare = nil
	if ch == nil {
		var err error
		if ch, err = r.conn.Channel(); err != nil {
			return nil, r.b.classify(err)
		}
	}
	c := &heldChan{
		queue:  r.queue,
		ch:     ch,
		tag:    fmt.Sprintf("dlqbot-%s-%d", r.id, len(r.chans)),
		window: min(r.window, r.want-r.seq),
		from:   r.seq,
		closes: ch.NotifyClose(make(chan *amqp.Error, 1)),
	}
	if err := ch.Qos(c.window, 0, false); err != nil {
		closeQuietly(ch)
		return nil, r.b.classify(err)
	}
	d, err := ch.Consume(r.queue, c.tag, false, false, false, false, nil)
	if err != nil {
		closeQuietly(ch)
		return nil, r.b.classify(err)
	}
	c.deliveries = d
	r.chans = append(r.chans, c)
	return c, nil
}

// lost explains a delivery stream that ended while the read still expected
// messages: the channel or connection closed, or the broker cancelled the
// consumer (the queue was deleted).
func (r *holdReader) lost(c *heldChan) error {
	select {
	case e, ok := <-c.closes:
		if ok && e != nil {
			return r.b.classify(e)
		}
	default:
	}
	if r.conn.IsClosed() {
		return r.b.lost(amqp.ErrClosed)
	}
	c.cancelled = true
	return fmt.Errorf("the broker cancelled the consumer (queue deleted?)")
}

// ack acknowledges one held delivery: the broker drops that message.
func (r *holdReader) ack(h held) error {
	if err := h.c.ch.Ack(h.d.DeliveryTag, false); err != nil {
		return r.b.classify(err)
	}
	h.c.acked++
	h.c.ackedTags = append(h.c.ackedTags, h.d.DeliveryTag)
	if h.c.above == nil {
		h.c.above = map[uint64]bool{}
	}
	h.c.above[h.d.DeliveryTag] = true
	return nil
}

// fence makes sure the broker processed every ack sent so far on the
// channels of hs: an ack has no answer, but the broker handles a
// channel's frames in order, so once a synchronous method sent after the
// acks is answered (basic.qos with the channel's own prefetch, which
// changes nothing: with global=false it applies to consumers started
// later), the acks took effect. An error means the acks' fate is unknown.
func (r *holdReader) fence(hs []held) error {
	seen := map[*heldChan]bool{}
	for _, h := range hs {
		if seen[h.c] {
			continue
		}
		seen[h.c] = true
		if err := h.c.ch.Qos(h.c.window, 0, false); err != nil {
			return r.b.classify(err)
		}
	}
	return nil
}

// ackAll acks held deliveries whose copies are recorded, collapsing runs
// of consecutive delivery tags on a channel into one multiple ack. A
// multiple ack never covers a delivery that is not to be acked (not
// picked, or its copy failed): from the channel's floor it extends only
// over tags being acked now or acked before; tags above such a hole are
// acked one by one, at once. It returns how many it acked.
func (r *holdReader) ackAll(hs []held) (int, error) {
	byChan := map[*heldChan]map[uint64]bool{}
	var order []*heldChan
	for _, h := range hs {
		m := byChan[h.c]
		if m == nil {
			m = map[uint64]bool{}
			byChan[h.c] = m
			order = append(order, h.c)
		}
		m[h.d.DeliveryTag] = true
	}
	n := 0
	for _, c := range order {
		ready := byChan[c]
		if c.above == nil {
			c.above = map[uint64]bool{}
		}
		var top uint64
		t := c.floor + 1
		for ready[t] || c.above[t] {
			if ready[t] {
				top = t
			}
			t++
		}
		if top > 0 {
			if err := c.ch.Ack(top, true); err != nil {
				return n, r.b.classify(err)
			}
			for tag := c.floor + 1; tag < t; tag++ {
				if ready[tag] {
					delete(ready, tag)
					c.acked++
					c.ackedTags = append(c.ackedTags, tag)
					n++
				}
				delete(c.above, tag)
			}
			c.floor = t - 1
		}
		for tag := range ready { // above a hole
			if err := c.ch.Ack(tag, false); err != nil {
				return n, r.b.classify(err)
			}
			c.acked++
			c.ackedTags = append(c.ackedTags, tag)
			c.above[tag] = true
			n++
		}
	}
	return n, nil
}

// randomID returns 8 random bytes in hex.
func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
