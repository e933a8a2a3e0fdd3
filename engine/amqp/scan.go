package amqp

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
)

// typeLookupTimeout bounds the management API lookup of a scanned queue's
// type: the scan does not wait longer for an answer it can do without.
const typeLookupTimeout = 2 * time.Second

// Scan reads the messages present in queue when it starts, in queue order,
// and calls visit for each without changing the queue: every message is
// held unacked until the read ends, then all are given back (requeued)
// with Nack(0, multiple, requeue), window by window in order (see
// holdReader).
// The body handed to visit is dropped after the call.
//
// An error from visit ends the visits early and is returned as is (joined
// with any error from giving the messages back); ctx cancellation ends the
// read at once. Either way every message is given back. On a quorum queue
// without a delivery limit, requeued messages go to the tail, so a partial
// read would rotate the queue: after a visit error Scan therefore still
// reads the rest of the messages (without visiting them) before giving
// them all back.
//
// Scan returns once the broker has been told to requeue the messages; a
// quorum queue applies the requeues asynchronously (seconds for 100,000), so
// its ready count may still be short when Scan returns. The next Scan or
// Move of the queue through the same Broker waits for them (up to
// Config.SettleTimeout); other clients should poll the ready count.
//
// A missing queue is engine.ErrQueueNotFound; an unreachable broker is
// engine.ErrBrokerUnavailable.
func (b *Broker) Scan(ctx context.Context, queue string, visit func(engine.Message) error) (engine.ScanInfo, error) {
	sc, err := b.openScan(ctx, queue)
	if err != nil {
		return sc.info, err
	}
	err = sc.read(ctx, visit, nil)
	return sc.info, b.endScan(sc.r, &sc.info, err)
}

// scanning is a scan's read up to its give-back (Scan, or a kept read:
// keep.go): the reader holding what it read, what the read saw so far and
// what the management API said of the queue.
type scanning struct {
	r     *holdReader
	info  engine.ScanInfo
	start time.Time
	// unacked is the queue's unacknowledged count before the read (−1:
	// unknown), for its coverage.
	unacked int
	// wholeOnly: after a visit error the rest is still read (see read).
	wholeOnly bool
}

// openScan opens a scan's reader of queue and learns the queue's type.
// A stream queue is refused.
func (b *Broker) openScan(ctx context.Context, queue string) (*scanning, error) {
	sc := &scanning{start: time.Now(), unacked: -1}
	typed := make(chan *queueJSON, 1)
	go func() {
		tctx, cancel := context.WithTimeout(ctx, typeLookupTimeout)
		defer cancel()
		q, _ := b.mgmt.queue(tctx, queue, false)
		typed <- q
	}()
	r, err := b.openReader(ctx, queue)
	if err != nil {
		return sc, fmt.Errorf("amqp: scan %s: %w", queue, err)
	}
	qinfo := <-typed
	limit := 0
	if qinfo != nil {
		sc.info.QueueType, limit = qinfo.queueType(), qinfo.deliveryLimit()
		sc.unacked = int(qinfo.MessagesUnacked)
	}
	if sc.info.QueueType == "stream" {
		_, _ = r.release()
		return sc, fmt.Errorf("amqp: scan %s: stream queues cannot be scanned: they keep messages after a read", queue)
	}
	// Classic queues put requeued messages back in place, and quorum queues
	// with a delivery limit near the head in requeue order; otherwise (quorum
	// without a limit, or a type we could not learn) only giving back the
	// whole queue keeps its order.
	sc.wholeOnly = sc.info.QueueType != "classic" && limit == 0
	// With a delivery limit a quorum queue puts requeued messages near the
	// head, but scrambles a large multi-message requeue: give back in paced
	// chunks.
	r.paced = sc.info.QueueType == "quorum" && limit > 0
	sc.r = r
	return sc, nil
}

// read reads the queue to the end of the scan, visiting each message and
// handing it to keep (when not nil) after its visit; everything read
// stays held for endScan or a kept read. It returns visit's error as it
// is.
func (sc *scanning) read(ctx context.Context, visit func(engine.Message) error, keep func(held)) error {
	r := sc.r
	var visitErr, readErr error
	for {
		h, err := r.next(ctx)
		if err != nil {
			if !errors.Is(err, errReadDone) {
				readErr = err
			}
			break
		}
		if visitErr != nil {
			continue // finishing the read of a quorum queue, see above
		}
		sc.info.Read++
		if err := visit(toMessage(h)); err != nil {
			visitErr = err
			if !sc.wholeOnly {
				break
			}
			continue
		}
		if keep != nil {
			keep(h)
		}
	}
	if visitErr != nil {
		r.cut = true
	}
	sc.info.Coverage = r.coverage(sc.unacked)
	sc.info.Coverage.Read = sc.info.Read
	sc.info.Duration = time.Since(sc.start)
	switch {
	case visitErr != nil:
		return visitErr
	case readErr != nil:
		return fmt.Errorf("amqp: scan %s: %w", r.queue, readErr)
	}
	return nil
}

// endScan gives back everything r holds, ending a scan whose outcome so
// far is info and err; an error giving back is joined to err.
func (b *Broker) endScan(r *holdReader, info *engine.ScanInfo, err error) error {
	start := time.Now()
	_, relErr := r.release()
	info.Duration += time.Since(start)
	if relErr != nil {
		return errors.Join(err, fmt.Errorf("amqp: scan %s: %w", r.queue, relErr))
	}
	return err
}

// toMessage is the engine's view of a held delivery. The delivery itself
// is left untouched (a Move republishes it); the headers are converted into
// a copy.
func toMessage(h held) engine.Message {
	return engine.Message{
		Seq:         h.seq,
		Headers:     fromTable(h.d.Headers),
		MessageID:   h.d.MessageId,
		Timestamp:   h.d.Timestamp,
		ContentType: h.d.ContentType,
		Body:        h.d.Body,
	}
}

// fromTable copies an AMQP table into plain Go values: nested tables become
// map[string]any and arrays []any, recursively. Other values (strings,
// numbers, bool, time.Time, []byte, amqp.Decimal) are kept as decoded.
func fromTable(t amqp.Table) map[string]any {
	if t == nil {
		return nil
	}
	m := make(map[string]any, len(t))
	for k, v := range t {
		m[k] = fromValue(v)
	}
	return m
}

func fromValue(v any) any {
	switch x := v.(type) {
	case amqp.Table:
		return fromTable(x)
	case map[string]any:
		return fromTable(amqp.Table(x))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fromValue(e)
		}
		return out
	}
	return v
}

// toTable is fromTable's inverse, for headers about to be published: nested
// maps become amqp.Table, which is what the library can encode.
func toTable(m map[string]any) amqp.Table {
	if m == nil {
		return nil
	}
	t := make(amqp.Table, len(m))
	for k, v := range m {
		t[k] = toValue(v)
	}
	return t
}

func toValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return toTable(x)
	case amqp.Table:
		return toTable(map[string]any(x))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = toValue(e)
		}
		return out
	}
	return v
}
