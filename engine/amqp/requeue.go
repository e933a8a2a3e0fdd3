package amqp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

const (
	// requeueChunk is the most messages one paced requeue carries. RabbitMQ
	// 3.10 applies a quorum queue's multi-message requeue in the iteration
	// order of an Erlang map — message-id order only up to 32 keys — and
	// batches requeues sent faster than it applies them; with a delivery
	// limit (requeued messages go near the head) either scrambles the queue.
	// Measured: Nack(multiple) of 3,000 misplaced 2,999; 32 at a time,
	// each awaited, misplaced none.
	requeueChunk = 32
	// chunkWait bounds the wait for one paced requeue to show in the ready
	// count; past it the rest is given back at once.
	chunkWait = 2 * time.Second
)

// release gives every delivery not acked back to the queue (requeues it):
// it cancels all consumers first (so nothing given back is delivered to a
// later window), drains what was still in flight, then requeues each
// channel's deliveries with Nack(0, multiple, requeue) — or, when paced, 32
// at a time, each waited for — and closes the channel, window by window,
// waiting for each close so the requeues reach the queue in order. It
// reports how many deliveries it gave back and records those the queue may
// not show yet, so the next read waits for them. A channel the broker closed
// earlier had its deliveries requeued by the broker itself, which release
// reports as an error.
func (r *holdReader) release() (int, error) {
	if r.closed {
		return 0, nil
	}
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
	closeQuietly(r.spare)
	closeQuietly(r.probe)
	var errs []error
	for _, c := range r.chans {
		if c.cancelled || c.ch.IsClosed() {
			continue
		}
		if err := c.ch.Cancel(c.tag, false); err != nil {
			errs = append(errs, fmt.Errorf("cancel consumer: %w", r.b.classify(err)))
		}
	}
	for _, c := range r.chans {
		n := drain(c.deliveries)
		c.drained += n
		r.delivered.Add(int64(n))
	}
	p := pacer{on: r.paced, base: -1}
	requeued, unsettled := 0, 0
	for i, c := range r.chans {
		if c.ch.IsClosed() {
			err := fmt.Errorf("channel %d closed before its messages were given back: the broker requeued them itself", i)
			if r.conn != nil && r.conn.IsClosed() {
				// The connection went with it: the node is lost, which a
				// paced replay outlives (engine/reconnect.go).
				err = fmt.Errorf("%w: %w", err, r.b.classify(amqp.ErrClosed))
			}
			errs = append(errs, err)
			continue
		}
		n, err := p.requeueAll(c)
		requeued += n
		if !p.on {
			unsettled += n
		}
		if err != nil {
			// Last resort: closing the channel makes the broker requeue
			// whatever it still holds.
			errs = append(errs, fmt.Errorf("requeue messages: %w", r.b.classify(err)))
			closeQuietly(c.ch)
			continue
		}
		if err := c.ch.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
			errs = append(errs, fmt.Errorf("close channel: %w", r.b.classify(err)))
		}
	}
	// Even a classic queue applies requeues after the channel closed: the
	// broker answers a passive declare ahead of the requeues still queued
	// for it (measured: a scan right after a 30,000-message scan counted
	// 10,000 under load), so every queue type's requeues are remembered.
	if unsettled > 0 || r.landing > 0 {
		acked := 0
		for _, c := range r.chans {
			acked += c.acked
		}
		r.b.pending.expect(r.queue, r.want+r.landing+r.arrived-acked)
	}
	_ = r.budget.done(r.seq >= r.want) // a store failure leaves the mark in this process's memory
	return requeued, errors.Join(errs...)
}

// pacer gives messages back either at once or in awaited chunks.
type pacer struct {
	on       bool
	base     int // ready count before the first paced requeue; -1 until read
	requeued int // messages given back so far by paced chunks
}

// requeueAll gives the deliveries of c not acked back and counts them.
func (p *pacer) requeueAll(c *heldChan) (int, error) {
	last := uint64(c.got + c.drained) // delivery tags run 1..last on c
	pending := int(last) - c.acked
	if pending <= 0 {
		return 0, nil
	}
	if p.on && p.base < 0 {
		q, err := c.ch.QueueDeclarePassive(c.queue, false, false, false, false, nil)
		if err != nil {
			return 0, err
		}
		p.base = q.Messages
	}
	acked := slices.Clone(c.ackedTags)
	slices.Sort(acked)
	done := 0
	for from := uint64(1); p.on && from <= last; from += requeueChunk {
		// Nack(multiple) needs its own tag outstanding: end the chunk on
		// the last tag not acked.
		n, top := 0, uint64(0)
		for tag := from; tag <= min(from+requeueChunk-1, last); tag++ {
			if len(acked) > 0 && acked[0] == tag {
				acked = acked[1:]
				continue
			}
			n, top = n+1, tag
		}
		if n == 0 {
			continue
		}
		if err := c.ch.Nack(top, true, true); err != nil {
			return done, err
		}
		done += n
		p.requeued += n
		if err := p.await(c); err != nil {
			return done, err
		}
	}
	if done < pending { // not paced, or pacing gave up
		if err := c.ch.Nack(0, true, true); err != nil {
			return done, err
		}
	}
	return pending, nil
}

// await polls the ready count until the requeues so far show; when they do
// not within chunkWait (another consumer takes them, say), pacing stops.
func (p *pacer) await(c *heldChan) error {
	deadline := time.Now().Add(chunkWait)
	for {
		q, err := c.ch.QueueDeclarePassive(c.queue, false, false, false, false, nil)
		if err != nil {
			return err
		}
		if q.Messages >= p.base+p.requeued {
			return nil
		}
		// No test of q.Consumers here: a quorum queue still counts our
		// cancelled consumers while they hold messages.
		if time.Now().After(deadline) {
			p.on = false
			return nil
		}
	}
}

// drain consumes a cancelled consumer's remaining deliveries until the
// library closes the stream, and counts them.
func drain(deliveries <-chan amqp.Delivery) int {
	n := 0
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	for {
		select {
		case _, ok := <-deliveries:
			if !ok {
				return n
			}
			n++
		case <-t.C:
			return n
		}
	}
}

// pendingRequeues remembers, per queue, the ready count the queue should
// show once the messages this Broker gave back have all landed: the ready
// count when the read began, plus what was still landing then, less what
// the read acked. Both queue types apply requeues asynchronously (100,000
// took 3–50 s to show on a quorum queue on RabbitMQ 3.10 here, and a
// classic queue answers a passive declare ahead of requeues still queued
// for it), so the next read waits for them instead of reading a queue that
// looks shorter than it is — which would miss messages and, on a quorum
// queue, rotate its order. Only the ready count is awaited: it works the
// same when the read that gave them back ran on another replica.
type pendingRequeues struct {
	mu sync.Mutex
	n  map[string]requeueExpectation
}

// requeueExpectation is the ready count a queue should reach, and when the
// messages that make it up were given back.
type requeueExpectation struct {
	count int
	at    time.Time
}

// expect records that queue should show count ready messages once the
// messages given back now have landed.
func (p *pendingRequeues) expect(queue string, count int) {
	if count <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = make(map[string]requeueExpectation)
	}
	p.n[queue] = requeueExpectation{count: count, at: time.Now()}
}

// take returns and forgets the expectation recorded for queue.
func (p *pendingRequeues) take(queue string) requeueExpectation {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.n[queue]
	delete(p.n, queue)
	return e
}

// all returns a copy of every expectation, by queue.
func (p *pendingRequeues) all() map[string]requeueExpectation {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.n)
}

// landed forgets the expectation recorded for queue once a passive declare
// shows its ready count reached it (the test awaitRequeues ends on): the
// messages given back have landed. Kept, it would make the next read wait
// for a count that others' reads since may keep it from reaching: a
// reader that took five messages after a preview's give-backs landed held
// the next read (a replay's cursor) for the whole StallTimeout of 2
// minutes, the idle queue's management statistics being too old to say
// they would never land (mayStillLand).
func (p *pendingRequeues) landed(queue string, ready int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.n[queue]; ok && ready >= e.count {
		delete(p.n, queue)
	}
}

// stillLanding says how many of the messages expected in queue may still be
// on their way back, once waiting for the ready count (which shows ready)
// has ended short of it: none when the management API says nothing is in
// flight (see settledSince) — the shortfall left the queue (consumed,
// expired, purged) — and otherwise the whole shortfall, which the read
// then counts as held elsewhere, so that it is not taken for a whole read
// and nothing is called missing on its account.
func (b *Broker) stillLanding(ctx context.Context, queue string, e requeueExpectation, ready int) int {
	short := e.count - ready
	if short <= 0 || b.settledSince(ctx, queue, e.at) {
		return 0
	}
	return short
}

// sampleAge bounds how much older than its SampledAt a management sample's
// counts can be: the sample is dated on the statistics interval's boundary
// at or after the collector stored it (measured on 3.10: dated 2.1 s ahead
// of the clock), and the queue emitted the counts up to one interval
// (collect_statistics_interval, 5 s by default) before that.
const sampleAge = 10 * time.Second

// sampledAfter reports whether st's counts were certainly taken after at.
func sampledAfter(st QueueStats, at time.Time) bool {
	return st.Sampled && st.SampledAt.After(at.Add(sampleAge))
}

// settledSince reports whether the management API has a sample of queue
// taken after at showing no unacknowledged message: requeues given back
// before at are then all applied. A requeue not yet applied keeps its
// message unacknowledged (checked out, on a quorum queue), so a ready count
// that stopped rising proves nothing by itself. A sample merely dated
// after at is not enough (see sampleAge): one taken before the read that
// gave the messages back (nothing unacknowledged then) made a read of a
// 20,000-message quorum queue whose requeues had not landed read 0 and
// call that whole.
func (b *Broker) settledSince(ctx context.Context, queue string, at time.Time) bool {
	st, err := b.statsNow(ctx, queue)
	return err == nil && sampledAfter(st, at) && st.Unacked == 0
}

// mayStillLand reports whether the messages expected in queue could all
// still show up, as far as the management API can tell: it counts at least
// that many in the queue, ready or checked out (a requeue not yet applied
// keeps its message checked out; a quorum queue on 3.10 showed none of
// 100,000 ready for 10 s after a read gave them back, while the API counted
// them all). When it counts fewer, some left the queue for good (acked by
// another client) and waiting cannot make the read whole. A sample that
// may predate the give-back (see sampleAge) says nothing yet: they may
// still land. An unanswered API says no.
//
// A classic queue applies a closed channel's requeues as soon as its
// process reaches them, ahead of any statistics it emits later: a sample
// newer than the give-back that still counts the queue short means the rest
// is held or was taken by another client, whose unacknowledged messages are
// no reason to wait (a reader holding five messages with basic.get, no
// consumer, held the next read for the whole StallTimeout of 2 minutes).
// The read then counts the shortfall as held elsewhere (stillLanding). A
// quorum queue's checked-out messages may be its own requeues not yet
// applied (3.10 applies them in bursts), and so still count.
func (b *Broker) mayStillLand(ctx context.Context, queue string, e requeueExpectation) bool {
	st, err := b.statsNow(ctx, queue)
	if err != nil || !st.Sampled {
		return false
	}
	if !sampledAfter(st, e.at) {
		return true
	}
	return st.Type != "classic" && st.Ready+st.Unacked >= int64(e.count)
}

// statsNow is QueueStats bounded by typeLookupTimeout.
func (b *Broker) statsNow(ctx context.Context, queue string) (QueueStats, error) {
	tctx, cancel := context.WithTimeout(ctx, typeLookupTimeout)
	defer cancel()
	return b.QueueStats(tctx, queue)
}

// consumerGrace is how long awaitRequeues waits while the queue reports
// consumers: a quorum queue may count a cancelled consumer until its
// requeues are applied, but a live consumer may take the requeued messages
// or hold them for as long as it likes, and then waiting longer is
// pointless (the read reports what the consumer holds).
const consumerGrace = 2 * time.Second

// awaitRequeues repeats the passive declare of queue on ch until its ready
// count reaches what e expects, consumers stay past consumerGrace,
// StallTimeout passes or ctx ends. When the count stops rising (or past
// SettleTimeout) it also asks the management API, at most once a second,
// and stops unless the expected messages could all still show up
// (mayStillLand): otherwise some left the queue meanwhile (consumed, moved
// by another client) and the count will not get there. Quorum queues on 3.10 apply a large requeue in bursts
// seconds apart (100,000 took 3–50 s), so a flat count alone is no reason
// to stop. It returns the last answer; the read then
// proceeds with whatever is there (see stillLanding).
func (b *Broker) awaitRequeues(ctx context.Context, ch *amqp.Channel, queue string, e requeueExpectation, q amqp.Queue) (amqp.Queue, error) {
	return b.awaitLanding(ctx, ch, queue, e, q, requeueStall, b.cfg.SettleTimeout)
}

// awaitLanding is awaitRequeues, asking the management API only once the
// ready count has not risen for stall, or settle has passed (0: never by
// time alone).
func (b *Broker) awaitLanding(ctx context.Context, ch *amqp.Channel, queue string, e requeueExpectation, q amqp.Queue, stall, settle time.Duration) (amqp.Queue, error) {
	var asked time.Time
	return countPoll{
		first: 2 * time.Millisecond, most: 50 * time.Millisecond,
		stop: func(q amqp.Queue, waited, flat time.Duration) bool {
			if q.Messages >= e.count || waited > b.cfg.StallTimeout || (q.Consumers > 0 && waited > consumerGrace) {
				return true
			}
			stalled := flat > stall || (settle > 0 && waited > settle)
			if !stalled || time.Since(asked) < time.Second {
				return false
			}
			asked = time.Now()
			return !b.mayStillLand(ctx, queue, e)
		},
	}.run(ctx, ch, queue, q)
}

// AwaitGiveBacks waits until every queue this Broker gave messages back to
// shows them ready again (pendingRequeues), as a next read of it would
// (awaitRequeues), or ctx ends. A process that ends right after a read
// calls it — the terminal's preview, which must leave the DLQ as it found
// it — since the broker applies a give-back after the read's channels
// closed: the give-back of a preview of 1,000,000 took 8.5 s to land on
// RabbitMQ 3.10, and the replay approved right after waited for it. An
// error names each queue that did not show all of them, and why.
func (b *Broker) AwaitGiveBacks(ctx context.Context) error {
	var errs []error
	for queue, e := range b.pending.all() {
		if err := b.awaitGiveBack(ctx, queue, e); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// giveBackStall is how long the ready count must stay flat before
// AwaitGiveBacks asks the management API whether the rest can still land:
// a classic queue applies a large give-back in bursts (a preview's of
// 1,000,000 showed 480,000 after 21 s, the count flat for over a second at
// times), and a sample newer than the give-back does not yet mean the rest
// was taken while the count still rises.
const giveBackStall = 5 * time.Second

// awaitGiveBack is AwaitGiveBacks for one queue, expected to show e.
func (b *Broker) awaitGiveBack(ctx context.Context, queue string, e requeueExpectation) error {
	ch, err := b.channel(ctx)
	if err != nil {
		return fmt.Errorf("amqp: await the messages given back to %s: %w", queue, err)
	}
	defer closeQuietly(ch)
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err == nil && q.Messages < e.count {
		q, err = b.awaitLanding(ctx, ch, queue, e, q, giveBackStall, 0)
	}
	if err != nil {
		return fmt.Errorf("amqp: await the messages given back to %s: %w", queue, b.classify(err))
	}
	b.pending.landed(queue, q.Messages)
	if q.Messages < e.count {
		return fmt.Errorf("amqp: %s shows %d messages ready, not the %d expected once what dlqbot gave back landed (another client holds or took the rest, or they are still on their way)", queue, q.Messages, e.count)
	}
	return nil
}
