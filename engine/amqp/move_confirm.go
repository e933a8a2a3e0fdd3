package amqp

import (
	"context"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// collect settles confirmed copies from the head of the in-flight list, in
// publish order. With block, it waits for the oldest confirm (the window is
// full). Confirmed copies are recorded and their originals acked in
// batches; the batch is flushed at once when nothing is left in flight.
func (m *mover) collect(ctx context.Context, block bool) error {
	for len(m.flight) > 0 {
		f := m.flight[0]
		if block {
			t := time.NewTimer(confirmWait)
			select {
			case <-f.dc.Done():
				t.Stop()
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
				return fmt.Errorf("no confirm from the broker within %s", confirmWait)
			}
			block = false
		} else {
			select {
			case <-f.dc.Done():
			default:
				return m.maybeFlush(ctx, false)
			}
		}
		// A mandatory publish that could not be routed bounces (basic.return)
		// before its ack, so its bounce is already buffered.
		m.matchBounces()
		m.flight = m.flight[1:]
		delete(m.byCopy, f.tag)
		switch {
		case f.bounced != nil:
			m.res.Failed = append(m.res.Failed, engine.MoveFailure{Moved: f.moved, Kind: engine.MoveUnroutable,
				Detail: fmt.Sprintf("the broker could not route it (basic.return %d %s; does queue %s exist?)", f.bounced.ReplyCode, f.bounced.ReplyText, f.key)})
		case f.dc.Acked():
			if len(m.done) == 0 {
				m.doneSince = time.Now()
			}
			m.done = append(m.done, f)
		case m.pub.IsClosed():
			// amqp091-go resolves every pending confirm as a nack when the
			// channel closes (it marks the channel closed first): no
			// answer came from the broker, so the copy may have been
			// delivered. In doubt, never "nacked" (which would be retried).
			m.res.Failed = append(m.res.Failed, engine.MoveFailure{Moved: f.moved, Kind: engine.MoveLost,
				Detail: "the channel closed before the broker confirmed the copy; the original stays in the DLQ (the copy may have been delivered: see the ledger's pending entries)"})
		default:
			m.res.Failed = append(m.res.Failed, engine.MoveFailure{Moved: f.moved, Kind: engine.MoveNacked, Detail: "the broker nacked the copy"})
		}
	}
	return m.maybeFlush(ctx, true)
}

// matchBounces pairs each buffered bounce (basic.return) with its copy by the
// copy's own header (copyHeader), exactly: identical copies of one message
// are told apart. A closed bounce channel (the channel or connection was
// lost) ends the matching for good; the copies' confirms then say what
// happened.
func (m *mover) matchBounces() {
	for m.bounces != nil {
		select {
		case ret, ok := <-m.bounces:
			if !ok {
				m.bounces = nil
				return
			}
			tag, _ := ret.Headers[copyHeader].(string)
			if f := m.byCopy[tag]; f != nil && f.bounced == nil {
				r := ret
				f.bounced = &r
			}
		default:
			return
		}
	}
}

// maybeFlush records and acks the confirmed copies when enough have
// gathered, when nothing is left in flight, or when the oldest has waited
// flushAfter (a paced move always has a copy in flight).
func (m *mover) maybeFlush(ctx context.Context, idle bool) error {
	if len(m.done) == 0 {
		return nil
	}
	if len(m.done) < flushEvery && !(idle && len(m.flight) == 0) && time.Since(m.doneSince) < flushAfter {
		return nil
	}
	return m.flush(ctx)
}

// flushAfter is the longest a confirmed copy waits to be recorded and acked.
const flushAfter = 20 * time.Millisecond

// recorded is a confirmed batch after the ledger write.
type recorded struct {
	batch []*inflight
	err   error
}

// recorderDepth is how many confirmed batches may wait to be recorded
// while publishing goes on.
const recorderDepth = 4

// startRecorder runs the ledger writes (req.Confirmed) off the publish
// loop, so a Redis round trip never stalls publishing. Acks still follow
// the write: the loop acks a batch only once it comes back recorded. The
// writes use a context that outlives ctx, so copies confirmed before a
// shutdown are still recorded.
func (m *mover) startRecorder(ctx context.Context) {
	m.toRecord = make(chan []*inflight, recorderDepth)
	m.recorded = make(chan recorded, recorderDepth+1)
	wctx := context.WithoutCancel(ctx)
	go func() {
		for batch := range m.toRecord {
			var err error
			if m.req.Confirmed != nil {
				moved := make([]engine.Moved, len(batch))
				for i, f := range batch {
					moved[i] = f.moved
				}
				err = m.req.Confirmed(wctx, moved)
			}
			m.recorded <- recorded{batch, err}
		}
	}()
}

// flush hands the confirmed copies to the recorder, then acks whatever it
// has recorded so far.
func (m *mover) flush(ctx context.Context) error {
	if len(m.done) > 0 {
		m.toRecord <- m.done
		m.recording++
		m.done = nil
	}
	return m.ackRecorded(false)
}

// ackRecorded acks the originals of recorded batches; with wait, it waits
// for every batch handed to the recorder. If recording failed, the
// originals stay in the DLQ and the move stops: their copies were sent,
// which the pending ledger intents show.
func (m *mover) ackRecorded(wait bool) error {
	for m.recording > 0 {
		var rec recorded
		if wait {
			rec = <-m.recorded
		} else {
			select {
			case rec = <-m.recorded:
			default:
				return nil
			}
		}
		m.recording--
		if rec.err != nil {
			for _, f := range rec.batch {
				m.res.Failed = append(m.res.Failed, engine.MoveFailure{Moved: f.moved, Kind: engine.MoveUnrecorded,
					Detail: "the copy was confirmed but could not be recorded, so the original was kept (a duplicate): " + rec.err.Error()})
			}
			if m.res.Stopped == nil {
				m.res.Stopped = rec.err
			}
			continue
		}
		hs := make([]held, len(rec.batch))
		for i, f := range rec.batch {
			hs[i] = f.h
		}
		_, err := m.r.ackAll(hs)
		if err == nil {
			// An ack written is not an ack processed: a connection lost
			// right after it gives the original back. Only acks the
			// broker is known to have handled count as Sent, so that every
			// original it may still hold is counted a duplicate.
			err = m.r.fence(hs)
		}
		if err != nil {
			// The copies are out and recorded; the originals whose ack did
			// not reach the broker come back when it notices the lost
			// channel: duplicates, in the ledger. Which acks got through is
			// unknown, so the whole batch is reported (an upper bound).
			for _, f := range rec.batch {
				m.res.Unacked = append(m.res.Unacked, f.moved)
			}
			if wait {
				continue
			}
			return err
		}
		m.sent(rec.batch)
	}
	return nil
}

// sent reports a batch Sent: listed in the result, or handed to
// req.OnSent when it is set.
func (m *mover) sent(batch []*inflight) {
	m.res.SentN += len(batch)
	if m.req.OnSent == nil {
		for _, f := range batch {
			m.res.Sent = append(m.res.Sent, f.moved)
		}
		return
	}
	moved := make([]engine.Moved, len(batch))
	for i, f := range batch {
		moved[i] = f.moved
	}
	m.req.OnSent(moved)
}

// finish waits for the confirms of every copy still in flight, then
// records and acks what was confirmed. Copies without a confirm (lost
// connection, timeout) are reported lost: their originals stay.
func (m *mover) finish(ctx context.Context) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), confirmWait)
	defer cancel()
	for len(m.flight) > 0 && !m.connLost() {
		if err := m.collect(wctx, true); err != nil {
			break
		}
	}
	for _, f := range m.flight {
		m.res.Failed = append(m.res.Failed, engine.MoveFailure{Moved: f.moved, Kind: engine.MoveLost,
			Detail: "no confirm arrived before the connection or channel was lost; the original stays in the DLQ (the copy may have been delivered: see the ledger's pending entries)"})
	}
	m.flight = nil
	// Record what was confirmed (even if the connection died: the sends
	// happened), then ack; originals that cannot be acked are Unacked.
	if len(m.done) > 0 {
		m.toRecord <- m.done
		m.recording++
		m.done = nil
	}
	close(m.toRecord)
	_ = m.ackRecorded(true)
}

// connLost reports whether the reader's connection or the publish channel died.
func (m *mover) connLost() bool {
	return m.r.conn.IsClosed() || (m.pub != nil && m.pub.IsClosed())
}
