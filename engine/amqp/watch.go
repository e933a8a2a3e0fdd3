package amqp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.Watches = (*Broker)(nil)

const (
	// WatchPrefix starts every watch queue's name: "dlqbot.watch.<random>".
	// The name carries no token: the management UI shows it to all.
	WatchPrefix = "dlqbot.watch."
	// WatchMaxLength is a watch's x-max-length (overflow drop-head): a
	// watch holds copies of what reached its DLQ, so at most this many. A
	// full watch proves nothing (WatchLook.Full) and the approval waits for
	// the statistics instead.
	WatchMaxLength = 10000
)

// watchArgs are a watch's arguments: a classic queue of at most
// WatchMaxLength copies, deleted by the broker after ttl unused. No
// message TTL: a copy that expired would hide an arrival.
func watchArgs(ttl time.Duration) amqp.Table {
	return amqp.Table{
		"x-queue-type": "classic",
		"x-max-length": int64(WatchMaxLength),
		"x-overflow":   "drop-head",
		"x-expires":    int64(max(ttl, time.Minute) / time.Millisecond),
	}
}

// OpenWatch declares a new watch of dlq bound exactly as dlq is (its
// bindings as the tap's, tap.go), then looks at the watch and then at
// dlq: a dead letter routed between the two looks is counted in both,
// which can only fail a later proof, never pass one. A DLQ that a queue
// dead-letters into through the default exchange, or that has no
// bindings, cannot be watched (engine.ErrUnsupported).
func (b *Broker) OpenWatch(ctx context.Context, dlq string, ttl time.Duration) (engine.WatchLook, error) {
	st, binds, err := b.tapState(ctx, dlq)
	if err != nil {
		return engine.WatchLook{}, fmt.Errorf("amqp: open watch of %s: %w", dlq, err)
	}
	if st.Mode != engine.ReturnsTap {
		return engine.WatchLook{}, fmt.Errorf("amqp: open watch of %s: %w: %s", dlq, engine.ErrUnsupported, st.Reason)
	}
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	name := WatchPrefix + hex.EncodeToString(raw[:])
	ch, err := b.channel(ctx)
	if err != nil {
		return engine.WatchLook{}, fmt.Errorf("amqp: open watch of %s: %w", dlq, err)
	}
	defer closeQuietly(ch)
	if _, err := ch.QueueDeclare(name, true, false, false, false, watchArgs(ttl)); err != nil {
		return engine.WatchLook{}, fmt.Errorf("amqp: open watch of %s: declare %s: %w", dlq, name, b.classify(err))
	}
	for _, w := range binds {
		if err := ch.QueueBind(name, w.RoutingKey, w.Source, false, bindArgs(w.Arguments)); err != nil {
			_ = b.CloseWatch(ctx, name)
			return engine.WatchLook{}, fmt.Errorf("amqp: open watch of %s: bind to %q (%q): %w", dlq, w.Source, w.RoutingKey, b.classify(err))
		}
	}
	lk := engine.WatchLook{Watch: name}
	err = b.lookWatch(ctx, name, &lk)
	if err == nil {
		err = b.lookDLQ(ctx, dlq, &lk)
	}
	if err != nil {
		_ = b.CloseWatch(ctx, name)
		return engine.WatchLook{}, fmt.Errorf("amqp: open watch of %s: %w", dlq, err)
	}
	return lk, nil
}

// LookWatch looks at dlq and then at its watch: a dead letter routed
// between the two looks is in the watch and not in the ready count, which
// can only fail a proof.
func (b *Broker) LookWatch(ctx context.Context, dlq, watch string) (engine.WatchLook, error) {
	lk := engine.WatchLook{Watch: watch}
	if err := b.lookDLQ(ctx, dlq, &lk); err != nil {
		return lk, fmt.Errorf("amqp: look at the watch of %s: %w", dlq, err)
	}
	if err := b.lookWatch(ctx, watch, &lk); err != nil {
		return lk, fmt.Errorf("amqp: look at the watch of %s: %w", dlq, err)
	}
	return lk, nil
}

func (b *Broker) lookDLQ(ctx context.Context, dlq string, lk *engine.WatchLook) error {
	q, err := b.lookQueue(ctx, dlq)
	lk.Ready, lk.Consumers = q.Messages, lk.Consumers+q.Consumers
	return err
}

func (b *Broker) lookWatch(ctx context.Context, watch string, lk *engine.WatchLook) error {
	q, err := b.lookQueue(ctx, watch)
	lk.Arrived, lk.Full, lk.Consumers = q.Messages, q.Messages >= WatchMaxLength, lk.Consumers+q.Consumers
	return err
}

// lookQueue is one passive declare of queue; a missing one is
// engine.ErrQueueNotFound.
func (b *Broker) lookQueue(ctx context.Context, queue string) (amqp.Queue, error) {
	q, found, err := b.declarePassive(ctx, queue)
	if err == nil && !found {
		err = fmt.Errorf("%s: %w", queue, engine.ErrQueueNotFound)
	}
	return q, err
}

// CloseWatch deletes a watch; one already gone is not an error.
func (b *Broker) CloseWatch(ctx context.Context, watch string) error {
	ch, err := b.channel(ctx)
	if err != nil {
		return fmt.Errorf("amqp: close watch %s: %w", watch, err)
	}
	defer closeQuietly(ch)
	if _, err := ch.QueueDelete(watch, false, false, false); err != nil && !isNotFound(err) {
		return fmt.Errorf("amqp: close watch %s: %w", watch, b.classify(err))
	}
	return nil
}
