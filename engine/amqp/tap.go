package amqp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.Taps = (*Broker)(nil)

// The tap's bounds: it is read all the time by the workers, and these only
// keep it from growing when none runs. A dead letter that waits longer than
// TapTTL, or is pushed out by TapMaxLength newer ones, is not recorded (the
// DLQ itself still holds it).
const (
	// TapPrefix starts every tap queue's name: "dlqbot.tap.<dlq>".
	TapPrefix = "dlqbot.tap."
	// TapTTL is the tap's x-message-ttl (24 hours).
	TapTTL = 24 * time.Hour
	// TapMaxLength is the tap's x-max-length, with overflow drop-head.
	TapMaxLength = 100000
	// TapExpires is the tap's x-expires: a tap nobody reads for a week is
	// deleted by the broker.
	TapExpires = 7 * 24 * time.Hour
	// tapBatch is how many tap messages one record call gets at most.
	tapBatch = 500
	// tapQuiet is how long a drain waits for the next delivery before it
	// looks at the tap's ready count again.
	tapQuiet = 50 * time.Millisecond
)

// TapName is the tap queue of dlq: "dlqbot.tap.<dlq>", or, when that would
// exceed the 255-byte limit on queue names, a shortened name ending in a
// hash of dlq.
func TapName(dlq string) string {
	name := TapPrefix + dlq
	if len(name) <= 255 {
		return name
	}
	sum := sha256.Sum256([]byte(dlq))
	cut := dlq[:200]
	for len(cut) > 0 && cut[len(cut)-1]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut = cut[:len(cut)-1]
	}
	return TapPrefix + cut + "." + hex.EncodeToString(sum[:8])
}

// tapArgs are the tap's arguments: a classic queue bounded in age and
// length. Classic, not quorum: the tap is a disposable copy (the DLQ holds
// the truth), read at once by the workers, and a quorum queue would
// replicate every dead letter once more through Raft for nothing; a
// classic queue is also what every broker version supports with
// drop-head and x-expires alike.
func tapArgs() amqp.Table {
	return amqp.Table{
		"x-queue-type":  "classic",
		"x-message-ttl": int64(TapTTL / time.Millisecond),
		"x-max-length":  int64(TapMaxLength),
		"x-overflow":    "drop-head",
		"x-expires":     int64(TapExpires / time.Millisecond),
	}
}

// TapState says which way returns to dlq can be found, changing nothing:
// tap when at least one binding routes dead letters to dlq through a named
// exchange and no queue of the vhost dead-letters straight into it
// through the default exchange; reread otherwise.
func (b *Broker) TapState(ctx context.Context, dlq string) (engine.TapState, error) {
	st, _, err := b.tapState(ctx, dlq)
	return st, err
}

func (b *Broker) tapState(ctx context.Context, dlq string) (engine.TapState, []queueBindingJSON, error) {
	st := engine.TapState{DLQ: dlq, Mode: engine.ReturnsReread}
	binds, err := b.mgmt.queueBindings(ctx, dlq)
	if errors.Is(err, errMgmtNotFound) {
		return st, nil, fmt.Errorf("amqp: tap state %s: %w", dlq, engine.ErrQueueNotFound)
	}
	if err != nil {
		return st, nil, fmt.Errorf("amqp: tap state %s: bindings: %w", dlq, err)
	}
	st.Bindings = len(binds)
	if len(binds) == 0 {
		st.Reason = fmt.Sprintf("%q is bound to no exchange: dead letters reach it only through the default exchange, which no other queue can share", dlq)
		return st, nil, nil
	}
	direct, err := b.mgmt.directFeeders(ctx, dlq, 100)
	if err != nil {
		return st, nil, fmt.Errorf("amqp: tap state %s: %w", dlq, err)
	}
	if len(direct) > 0 {
		st.Reason = fmt.Sprintf("%s dead-letter(s) straight into %q through the default exchange, which no other queue can share", quoteNames(direct), dlq)
		return st, nil, nil
	}
	st.Mode, st.Queue = engine.ReturnsTap, TapName(dlq)
	return st, binds, nil
}

// EnsureTap declares dlq's tap and makes its bindings exactly dlq's
// (adding the missing ones first, then removing those dlq no longer has),
// so every dead letter routed to dlq from now on reaches the tap too. In
// reread mode it declares nothing.
func (b *Broker) EnsureTap(ctx context.Context, dlq string) (engine.TapState, error) {
	st, want, err := b.tapState(ctx, dlq)
	if err != nil || st.Mode != engine.ReturnsTap {
		return st, err
	}
	ch, err := b.channel(ctx)
	if err != nil {
		return st, fmt.Errorf("amqp: ensure tap %s: %w", dlq, err)
	}
	defer closeQuietly(ch)
	if _, err := ch.QueueDeclare(st.Queue, true, false, false, false, tapArgs()); err != nil {
		return st, fmt.Errorf("amqp: ensure tap %s: declare %s: %w", dlq, st.Queue, b.classify(err))
	}
	have, err := b.mgmt.queueBindings(ctx, st.Queue)
	if err != nil && !errors.Is(err, errMgmtNotFound) {
		return st, fmt.Errorf("amqp: ensure tap %s: bindings of %s: %w", dlq, st.Queue, err)
	}
	haveKeys := map[string]bool{}
	for _, h := range have {
		haveKeys[h.key()] = true
	}
	wantKeys := map[string]bool{}
	for _, w := range want {
		wantKeys[w.key()] = true
		if haveKeys[w.key()] {
			continue
		}
		if err := ch.QueueBind(st.Queue, w.RoutingKey, w.Source, false, bindArgs(w.Arguments)); err != nil {
			return st, fmt.Errorf("amqp: ensure tap %s: bind to %q (%q): %w", dlq, w.Source, w.RoutingKey, b.classify(err))
		}
	}
	for _, h := range have {
		if wantKeys[h.key()] {
			continue
		}
		if err := ch.QueueUnbind(st.Queue, h.RoutingKey, h.Source, bindArgs(h.Arguments)); err != nil {
			return st, fmt.Errorf("amqp: ensure tap %s: unbind from %q (%q): %w", dlq, h.Source, h.RoutingKey, b.classify(err))
		}
	}
	return st, nil
}

// bindArgs turns binding arguments decoded from JSON back into an AMQP
// table: integral numbers become int64 (JSON has only floats).
func bindArgs(m map[string]any) amqp.Table {
	if len(m) == 0 {
		return nil
	}
	t := amqp.Table{}
	for k, v := range m {
		t[k] = fromJSON(v)
	}
	return t
}

func fromJSON(v any) any {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
		return x
	case map[string]any:
		return bindArgs(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fromJSON(e)
		}
		return out
	}
	return v
}

// resetTimer stops t, empties its channel and starts it again.
func resetTimer(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}
