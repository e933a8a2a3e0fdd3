package amqp

import (
	"context"
	"fmt"
	"sync"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.CursorMover = (*Broker)(nil)

// Cursor is one read of a DLQ kept open across moves (engine.Cursor): a
// replay's steps continue it from where the last one stopped instead of
// reading the DLQ from its head each time. What a move reads and does not
// take stays held unacked on the reader's channels — so no other read
// sees it and the DLQ's order is kept — until Release gives all of it
// back, in order (see holdReader.release). The messages a move was told
// are wanted later (Pick.Later) are kept in memory as well, and offered
// first to the next move: they precede everything unread.
type Cursor struct {
	b *Broker
	r *holdReader
	// unacked is the management API's unacknowledged count of the queue
	// before the read (−1: unknown), for its coverage.
	unacked int
	// kept are held messages wanted by a later move, in DLQ order.
	kept []held
	// mu makes Release safe from another goroutine than Move's (a
	// shutdown); moves themselves are sequential.
	mu sync.Mutex
}

// OpenCursor starts a read of queue that later moves continue (see
// Cursor). A missing queue is engine.ErrQueueNotFound.
func (b *Broker) OpenCursor(ctx context.Context, queue string) (engine.Cursor, error) {
	r, unacked, err := b.openMoveReader(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("amqp: open cursor on %s: %w", queue, err)
	}
	return &Cursor{b: b, r: r, unacked: unacked}, nil
}

// openMoveReader opens a reader for a move and learns, from the management
// API, whether its give-backs must be paced (a quorum queue with a delivery
// limit scrambles a large one-shot requeue) and how many messages other
// clients held unacked before it began (−1: unknown). A move acks what it
// picks among what it holds, so the reader's windows are narrowed for
// that (forAcks).
func (b *Broker) openMoveReader(ctx context.Context, queue string) (*holdReader, int, error) {
	r, err := b.openReader(ctx, queue)
	if err != nil {
		return nil, 0, err
	}
	tctx, cancel := context.WithTimeout(ctx, typeLookupTimeout)
	defer cancel()
	unacked := -1
	if q, _ := b.mgmt.queue(tctx, queue, false); q != nil {
		r.paced = q.queueType() == "quorum" && q.deliveryLimit() > 0
		unacked = int(q.MessagesUnacked)
	}
	r.forAcks()
	return r, unacked, nil
}

// Move continues the read: it offers the kept messages to req.Pick first,
// then reads on from the cursor, exactly as Broker.Move does, except that
// what it does not take stays held for the next move. Its Coverage is the
// read's so far (Read counts every message since the cursor opened). After
// an error the cursor is released and must not be used again.
func (c *Cursor) Move(ctx context.Context, req engine.MoveRequest) (engine.MoveResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.r.closed {
		return engine.MoveResult{}, fmt.Errorf("amqp: move from %s: the cursor was released", c.r.queue)
	}
	if req.Window <= 0 {
		req.Window = 500
	}
	m := &mover{b: c.b, req: req, r: c.r, user: c.b.uri.Username, cursor: c}
	m.startRecorder(ctx)
	err := m.run(ctx)
	m.settleKept()
	m.finish(ctx)
	m.fenceDrops()
	m.res.Coverage = c.r.coverage(c.unacked)
	if err == nil && m.connLost() {
		// What the cursor holds went back to the DLQ with the connection.
		err = c.b.lost(fmt.Errorf("the connection closed during the move"))
	}
	if m.pub != nil {
		closeQuietly(m.pub)
	}
	if err != nil {
		_, _ = c.releaseLocked()
		return m.res, fmt.Errorf("amqp: move from %s: %w", req.Queue, err)
	}
	return m.res, nil
}

// Held is how many messages of the DLQ the cursor holds as the broker
// counts them, none of which is in the DLQ's ready count: on the channel
// still consuming, its whole prefetch window (the broker keeps it full,
// ahead of the read, refilling what a move acks, as long as messages
// ready when the read began are left); on each earlier one, and on a tail
// consumer's (tail.go), what it delivered less what was moved.
func (c *Cursor) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.r.closed {
		return 0
	}
	n := 0
	for _, ch := range c.r.chans {
		if ch.cancelled || ch.tail {
			n += ch.got + ch.drained - ch.acked
		} else {
			n += max(0, min(ch.window, c.r.want-ch.from-ch.acked))
		}
	}
	return n
}

// Done reports whether the read has ended: it saw every message ready when
// it began, or the broker had none left for it.
func (c *Cursor) Done() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.r.done || c.r.seq >= c.r.want
}

// Release gives every held message back to the DLQ, in order, and ends the
// read (see holdReader.release). It returns how many it gave back; a second
// call does nothing.
func (c *Cursor) Release() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.releaseLocked()
}

func (c *Cursor) releaseLocked() (int, error) {
	c.kept = nil
	n, err := c.r.release()
	if err != nil {
		return n, fmt.Errorf("amqp: release cursor on %s: %w", c.r.queue, err)
	}
	return n, nil
}

// pull is a cursor move's next message: the kept ones first, in order,
// then the reader's next delivery. fromKept says which.
func (m *mover) pull(ctx context.Context) (h held, fromKept bool, err error) {
	if c := m.cursor; c != nil && m.keptAt < len(c.kept) {
		h, err = unpackHeld(c.kept[m.keptAt])
		m.keptAt++
		return h, true, err
	}
	h, err = m.r.next(ctx)
	return h, false, err
}

// keep holds on to h for a later move (a cursor's message a later step
// wants). fromKept says whether h came from the kept list.
func (m *mover) keep(h held, fromKept bool) {
	h = packHeld(h) // kept for a while, perhaps with a hundred thousand others
	if fromKept {
		m.keptOld = append(m.keptOld, h)
	} else {
		m.keptNew = append(m.keptNew, h)
	}
}

// settleKept leaves the cursor's kept list in DLQ order at the end of a
// move: the kept messages offered again and kept, then those not offered,
// then what this move read and kept (a move reads only once every kept
// message was offered, so everything it read follows them).
//
// It works in place: the ones offered again and kept (at most keptAt, in
// order) go back into the last of the offered ones' slots, the slots
// before them are cleared (what was sent is no longer held in memory) and
// the list is cut there, so that no step copies the whole list: a
// filtered replay of a large DLQ keeps most of its selection here (up to
// engine.TailKeep messages), offered again at every step.
func (m *mover) settleKept() {
	c := m.cursor
	if c == nil {
		return
	}
	start := m.keptAt - len(m.keptOld)
	copy(c.kept[start:m.keptAt], m.keptOld)
	clear(c.kept[:start])
	c.kept = append(c.kept[start:], m.keptNew...)
	m.keptAt, m.keptOld, m.keptNew = 0, nil, nil
}
