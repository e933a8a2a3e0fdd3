package amqp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.Mover = (*Broker)(nil)

// confirmWait bounds the wait for the broker's confirms of copies already
// published once a move stops.
const confirmWait = 30 * time.Second

// flushEvery is how many confirmed copies are recorded and acked together.
const flushEvery = 200

// copyHeader names each copy a Move publishes ("<move>-<n>"), so a
// bounce (basic.return) is matched to exactly the copy it is (identical copies
// of one message share their message id, routing key and body).
const copyHeader = "x-dlqbot-copy"

// inflight is a copy published and not yet confirmed.
type inflight struct {
	h       held
	moved   engine.Moved
	dc      *amqp.DeferredConfirmation
	key     string
	tag     string // its copyHeader value
	bounced *amqp.Return
}

// mover is the state of one Move.
type mover struct {
	b       *Broker
	req     engine.MoveRequest
	r       *holdReader
	pub     *amqp.Channel
	bounces chan amqp.Return
	flight  []*inflight // publish order
	byCopy  map[string]*inflight
	done    []*inflight // confirmed, not yet recorded and acked
	// doneSince is when the oldest of done was confirmed.
	doneSince time.Time
	// The recorder: batches waiting for the ledger, and back from it.
	toRecord  chan []*inflight
	recorded  chan recorded
	recording int // batches handed to the recorder and not yet acked
	res       engine.MoveResult
	user      string
	next      time.Time // pacing: earliest time of the next publish
	// cursor is the cursor a move continues (nil for a one-shot Move);
	// keptAt is how far its kept list has been offered, and keptOld and
	// keptNew what this move keeps again and newly (see settleKept).
	cursor  *Cursor
	keptAt  int
	keptOld []held
	keptNew []held
	// drops and dropped are the originals acked without a copy (drop).
	drops   []held
	dropped []engine.Moved
}

// Move makes one confirm-then-ack pass over req.Queue (docs/design.md "Replaying"): it reads
// the DLQ in order, publishes a copy of each message req.Pick chooses —
// through the default exchange to the target's name, mandatory, with
// publisher confirms, at most req.Window unconfirmed — and acks the
// original only after the broker confirmed the copy and req.Confirmed
// recorded it. A nack, a bounce (basic.return: unroutable), a refused publish
// or a lost connection leaves the original in the DLQ; every message not
// moved is given back with Nack(multiple, requeue).
func (b *Broker) Move(ctx context.Context, req engine.MoveRequest) (engine.MoveResult, error) {
	if req.Window <= 0 {
		req.Window = 500
	}
	// Like Scan: a quorum queue with a delivery limit scrambles a large
	// one-shot requeue, so what the move leaves is given back in paced chunks.
	r, unacked, err := b.openMoveReader(ctx, req.Queue)
	if err != nil {
		return engine.MoveResult{}, fmt.Errorf("amqp: move from %s: %w", req.Queue, err)
	}
	m := &mover{b: b, req: req, r: r, user: b.uri.Username}
	m.startRecorder(ctx)
	err = m.run(ctx)
	// Whatever happened, settle what was published and give the rest back.
	m.finish(ctx)
	m.fenceDrops()
	m.res.Coverage = r.coverage(unacked)
	if _, relErr := r.release(); relErr != nil && err == nil && !m.connLost() {
		err = relErr
	}
	if err == nil && m.connLost() && m.leftInDoubt() {
		// Every copy was handed over, but the connection went before
		// their confirms or acks: a lost connection all the same, so the
		// engine settles, reconciles and says so (engine/reconcile.go).
		err = b.lost(amqp.ErrClosed)
	}
	if m.pub != nil {
		closeQuietly(m.pub)
	}
	if err != nil {
		return m.res, fmt.Errorf("amqp: move from %s: %w", req.Queue, err)
	}
	return m.res, nil
}

func (m *mover) run(ctx context.Context) error {
	pub, err := m.r.conn.Channel()
	if err != nil {
		return m.b.classify(err)
	}
	m.pub = pub
	if err := pub.Confirm(false); err != nil {
		return m.b.classify(err)
	}
	// Buffered beyond the window: a blocked listener loses notifications.
	m.bounces = pub.NotifyReturn(make(chan amqp.Return, m.req.Window+64))
	batch := max(1, min(m.req.Window/2, 250))
	if m.req.Rate > 0 {
		batch = max(1, min(batch, int(m.req.Rate/10)))
	}
	// Intents are pipelined: batch k+1's intent is written while batch k
	// publishes, so the ledger's round trip never stalls publishing — and
	// still no copy is published before its intent is recorded.
	var ahead *intent
	defer func() { m.abandonIntent(ahead) }() // an early return: nothing of it was published
	var picked []pendingPick
	for {
		if m.req.Satisfied != nil && m.req.Satisfied() && len(picked) == 0 {
			break
		}
		h, fromKept, err := m.pull(ctx)
		if errors.Is(err, errReadDone) {
			break
		}
		if err != nil {
			return err
		}
		if !fromKept {
			m.res.Read++
		}
		p, ok := m.req.Pick(toMessage(h))
		if ok && p.Drop {
			if err := m.drop(h, p); err != nil {
				return err
			}
			continue
		}
		if !ok {
			if p.Later && m.cursor != nil {
				m.keep(h, fromKept)
			}
			continue
		}
		picked = append(picked, pendingPick{h: h, p: p, tag: m.tag(p)})
		satisfied := m.req.Satisfied != nil && m.req.Satisfied()
		if len(picked) >= batch || satisfied {
			next := m.intend(ctx, picked)
			picked = nil
			prev := ahead
			ahead = next
			if err := m.publish(ctx, prev); err != nil {
				return err
			}
			if m.res.Stopped != nil {
				break // the final publish reports the batch ahead Unsent
			}
		}
	}
	if len(picked) > 0 {
		next := m.intend(ctx, picked)
		prev := ahead
		ahead = next
		if err := m.publish(ctx, prev); err != nil {
			return err
		}
	}
	last := ahead
	ahead = nil
	return m.publish(ctx, last)
}

// pendingPick is a held message chosen for sending.
type pendingPick struct {
	h   held
	p   engine.Pick
	tag string // its copyHeader value, known before its intent is written
}

// tag names the next copy: p.Copy for a resend, else "<move>-<n>".
func (m *mover) tag(p engine.Pick) string {
	if p.Copy != "" {
		return p.Copy
	}
	// Numbered by the read, not the move: a cursor's moves go on with
	// the numbers, so each copy of a read has its own tag (the ledger
	// names copies by it).
	m.r.copies++
	return m.r.id + "-" + strconv.Itoa(m.r.copies)
}

// intent is a batch whose ledger intent is being written.
type intent struct {
	batch []pendingPick
	done  chan intentDone
}

// intentDone is what req.Intend said of a batch.
type intentDone struct {
	refused map[string]string
	err     error
}

func moved(pp pendingPick) engine.Moved {
	return engine.Moved{Seq: pp.h.seq, ID: pp.p.ID, Target: pp.p.Target, Copy: pp.tag}
}

// intend starts writing batch's intent (req.Intend) in the background.
func (m *mover) intend(ctx context.Context, batch []pendingPick) *intent {
	in := &intent{batch: batch, done: make(chan intentDone, 1)}
	if m.req.Intend == nil || m.res.Stopped != nil {
		in.done <- intentDone{err: m.res.Stopped}
		return in
	}
	mv := make([]engine.Moved, len(batch))
	for i, pp := range batch {
		mv[i] = moved(pp)
	}
	go func() {
		refused, err := m.req.Intend(ctx, mv)
		in.done <- intentDone{refused: refused, err: err}
	}()
	return in
}

// abandonIntent waits for an intent that will not be published and
// reports its batch Unsent (certainly not sent), but for what Intend
// refused (Refused: never recorded).
func (m *mover) abandonIntent(in *intent) {
	if in == nil {
		return
	}
	m.sortRefused(in, <-in.done)
	for _, pp := range in.batch {
		m.res.Unsent = append(m.res.Unsent, moved(pp))
	}
}

// sortRefused takes what Intend refused out of in's batch, into Refused.
func (m *mover) sortRefused(in *intent, done intentDone) {
	if len(done.refused) == 0 {
		return
	}
	kept := make([]pendingPick, 0, len(in.batch))
	for _, pp := range in.batch {
		if by, no := done.refused[pp.p.ID]; no {
			m.res.Refused = append(m.res.Refused, engine.RefusedMove{Moved: moved(pp), By: by})
			continue
		}
		kept = append(kept, pp)
	}
	in.batch = kept
}

// publish waits for the batch's intent, then publishes each copy; once
// the move stops, the rest of the batch is reported Unsent.
func (m *mover) publish(ctx context.Context, in *intent) error {
	if in == nil {
		return nil
	}
	done := <-in.done
	if done.err != nil && m.res.Stopped == nil {
		m.res.Stopped = done.err
	}
	m.sortRefused(in, done)
	for i, pp := range in.batch {
		if m.cont() != nil || m.pace(ctx) != nil {
			for _, rest := range in.batch[i:] {
				m.res.Unsent = append(m.res.Unsent, moved(rest))
			}
			return nil
		}
		mv := moved(pp)
		d := pp.h.d
		if d.UserId != "" && d.UserId != m.user {
			m.res.Failed = append(m.res.Failed, engine.MoveFailure{Moved: mv, Kind: engine.MoveRefused,
				Detail: fmt.Sprintf("its user_id %q differs from dlqbot's user %q, which the broker refuses", d.UserId, m.user)})
			continue
		}
		tag := pp.tag
		var headers amqp.Table
		if m.req.Rewrite != nil {
			headers = amqp.Table(m.req.Rewrite(map[string]any(d.Headers), pp.p)) // its own map
			if headers == nil {
				headers = amqp.Table{}
			}
			headers[copyHeader] = tag
		} else {
			headers = withHeader(d.Headers, copyHeader, tag) // the delivery's own table stays as it is
		}
		msg := amqp.Publishing{
			Headers: headers, ContentType: d.ContentType, ContentEncoding: d.ContentEncoding,
			DeliveryMode: d.DeliveryMode, Priority: d.Priority, CorrelationId: d.CorrelationId,
			ReplyTo: d.ReplyTo, Expiration: d.Expiration, MessageId: d.MessageId, Timestamp: d.Timestamp,
			Type: d.Type, UserId: d.UserId, AppId: d.AppId, Body: d.Body,
		}
		dc, err := m.pub.PublishWithDeferredConfirmWithContext(ctx, "", pp.p.Target, true, false, msg)
		if err != nil {
			for _, rest := range in.batch[i+1:] {
				m.res.Unsent = append(m.res.Unsent, moved(rest))
			}
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				// The library sends nothing once ctx is done: this copy
				// certainly did not leave, like the rest of its batch.
				m.res.Unsent = append(m.res.Unsent, mv)
				return err
			}
			// This copy may or may not have left: it stays pending ("lost").
			m.res.Failed = append(m.res.Failed, engine.MoveFailure{Moved: mv, Kind: engine.MoveLost, Detail: "the publish failed: " + err.Error()})
			return m.b.classify(err)
		}
		f := &inflight{h: pp.h, moved: mv, dc: dc, key: pp.p.Target, tag: tag}
		m.flight = append(m.flight, f)
		if m.byCopy == nil {
			m.byCopy = map[string]*inflight{}
		}
		m.byCopy[tag] = f
		if err := m.collect(ctx, len(m.flight) >= m.req.Window); err != nil {
			for _, rest := range in.batch[i+1:] {
				m.res.Unsent = append(m.res.Unsent, moved(rest))
			}
			return err
		}
	}
	return nil
}

// withHeader returns a copy of h with k set to v (h itself may be the
// delivery's own table, which must not change).
func withHeader(h amqp.Table, k string, v any) amqp.Table {
	out := make(amqp.Table, len(h)+1)
	for hk, hv := range h {
		out[hk] = hv
	}
	out[k] = v
	return out
}

// cont asks the caller whether to go on; a refusal is recorded as Stopped.
func (m *mover) cont() error {
	if m.res.Stopped != nil {
		return m.res.Stopped
	}
	if m.req.Continue != nil {
		if err := m.req.Continue(); err != nil {
			m.res.Stopped = err
			return err
		}
	}
	return nil
}

// paceCatchUp is how far behind its schedule a paced move may fall and
// still catch up. A publish slot is missed whenever something else in the
// loop (a confirm's ack fence, a slow intent write, a late timer on a busy
// machine) takes longer than the gap between two publishes. Each miss
// lost for good would add up on a busy machine: a rate of 50 sends 25–40
// msg/s beside make test's other lanes that way. Caught up, the rate
// holds on average, and any window of time t sends at most
// (t + paceCatchUp) × rate + 1 (TestAPacedReplayCatchesUpWithinItsBound).
const paceCatchUp = 250 * time.Millisecond

// pace waits for the next publish slot when a rate is set. The slots
// follow the rate from the move's first publish; a move that fell behind
// publishes without waiting until it is back on schedule, or within
// paceCatchUp of it.
func (m *mover) pace(ctx context.Context) error {
	rate := m.req.Rate
	if m.req.Pace != nil {
		rate = m.req.Pace()
	}
	if rate <= 0 {
		return nil
	}
	now := time.Now()
	if m.next.IsZero() {
		m.next = now
	} else if behind := now.Add(-paceCatchUp); m.next.Before(behind) {
		m.next = behind
	}
	if wait := m.next.Sub(now); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if m.res.Stopped == nil {
				m.res.Stopped = ctx.Err()
			}
			return ctx.Err()
		case <-t.C:
		}
		if err := m.cont(); err != nil {
			return err
		}
	}
	m.next = m.next.Add(time.Duration(float64(time.Second) / rate))
	return nil
}

// Ping checks that the broker accepts an AMQP channel.
func (b *Broker) Ping(ctx context.Context) error {
	ch, err := b.channel(ctx)
	if err != nil {
		return fmt.Errorf("amqp: ping: %w", err)
	}
	closeQuietly(ch)
	return nil
}

// DeclareQueue declares a durable classic queue unless one of that name
// exists (whatever its arguments: a passive probe comes first, since a
// declare with other arguments would fail and close the channel).
func (b *Broker) DeclareQueue(ctx context.Context, name string) error {
	st, err := b.Inspect(ctx, name)
	if err != nil {
		return fmt.Errorf("amqp: declare %s: %w", name, err)
	}
	if st.Exists {
		return nil
	}
	ch, err := b.channel(ctx)
	if err != nil {
		return fmt.Errorf("amqp: declare %s: %w", name, err)
	}
	defer closeQuietly(ch)
	if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		return fmt.Errorf("amqp: declare %s: %w", name, b.classify(err))
	}
	return nil
}

// leftInDoubt reports whether the pass left copies whose fate the lost
// connection hid: unconfirmed (in doubt) or confirmed with their originals
// unacked.
func (m *mover) leftInDoubt() bool {
	if len(m.res.Unacked) > 0 {
		return true
	}
	for _, f := range m.res.Failed {
		if f.Kind == engine.MoveLost {
			return true
		}
	}
	return false
}

// drop acks an original Pick dropped (engine.Pick.Drop): its copy was
// confirmed by an earlier move, so no copy is sent. fenceDrops reports it
// Dropped once the broker is known to have handled the ack.
func (m *mover) drop(h held, p engine.Pick) error {
	if _, err := m.r.ackAll([]held{h}); err != nil {
		return err
	}
	m.drops = append(m.drops, h)
	m.dropped = append(m.dropped, engine.Moved{Seq: h.seq, ID: p.ID})
	return nil
}

// fenceDrops reports the dropped originals Dropped once a fence shows the
// broker handled their acks; after a failed fence their fate is unknown
// (a later count of the DLQ tells), and none is reported.
func (m *mover) fenceDrops() {
	if len(m.drops) == 0 {
		return
	}
	if err := m.r.fence(m.drops); err == nil && !m.connLost() {
		m.res.Dropped = append(m.res.Dropped, m.dropped...)
	}
	m.drops, m.dropped = nil, nil
}
