package engine

import (
	"context"
	"errors"
	"time"
)

// Errors the adapters return, checked with errors.Is.
var (
	// ErrQueueNotFound means a queue does not exist on the broker.
	ErrQueueNotFound = errors.New("queue not found")
	// ErrBrokerUnavailable means RabbitMQ (AMQP or management) could not be reached.
	ErrBrokerUnavailable = errors.New("broker unavailable")
	// ErrStoreUnavailable means Redis could not be reached.
	ErrStoreUnavailable = errors.New("store unavailable")
	// ErrTokenNotFound means a preview token is unknown or expired.
	ErrTokenNotFound = errors.New("preview token not found or expired")
	// ErrTokenUsed means a preview token already started a replay.
	ErrTokenUsed = errors.New("preview token already used")
	// ErrReplayNotFound means a replay id is unknown.
	ErrReplayNotFound = errors.New("replay not found")
	// ErrLeaseLost means the caller no longer owns a replay (lease gone or
	// epoch moved on): it must stop sending at once.
	ErrLeaseLost = errors.New("replay lease lost")
	// ErrUnsupported means a request names something this bot cannot do
	// (such as another vhost).
	ErrUnsupported = errors.New("not supported")
	// ErrReplayBusy means another process holds the replay's lease.
	ErrReplayBusy = errors.New("replay is owned by another process")
	// ErrReadBudget means a read of a queue could bring a message to its delivery limit.
	ErrReadBudget = errors.New("read budget exhausted")
)

// Clock tells the time; injected so leases and timeouts are tested without sleeping.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// QueueState is what the broker says about a queue right now.
type QueueState struct {
	Name   string `json:"name"`
	Exists bool   `json:"exists"`
	// Ready is the number of messages ready for delivery.
	Ready int `json:"ready"`
	// Consumers is the number of live consumers.
	Consumers int `json:"consumers"`
	// Type is "classic", "quorum" or "stream" ("" when unknown).
	Type string `json:"type,omitempty"`
	// DeliveryLimit is the quorum queue's delivery limit (x-delivery-limit
	// argument or policy); 0 when none is known.
	DeliveryLimit int `json:"delivery_limit,omitempty"`
}

// ScanInfo describes a completed scan.
type ScanInfo struct {
	// Read is how many messages the scan saw.
	Read int
	// QueueType is the scanned queue's type.
	QueueType string
	// Duration is how long the scan took, requeue included.
	Duration time.Duration
}

// Broker is what the engine needs from RabbitMQ.
type Broker interface {
	// Inspect reports whether a queue exists, its ready count and its
	// consumers. A missing queue is QueueState{Exists: false} and a nil
	// error; an unreachable broker is ErrBrokerUnavailable.
	Inspect(ctx context.Context, queue string) (QueueState, error)
	// Scan reads every message of queue (those present when it starts) and
	// calls visit for each, in queue order, without changing the queue:
	// afterwards the same messages are there in the same order. An error from
	// visit ends the scan early; every message is still returned.
	Scan(ctx context.Context, queue string, visit func(Message) error) (ScanInfo, error)
	// Route returns the queues that exchange's bindings route routingKey to.
	Route(ctx context.Context, exchange, routingKey string) ([]string, error)
}

// QueueStats are a queue's counters from the management API. They lag the
// broker by the statistics interval (5 s by default) and are per-queue
// totals shared by every client.
type QueueStats struct {
	Ready      int
	Unacked    int
	Consumers  int
	Publish    int64
	DeliverGet int64
	Ack        int64
	Redeliver  int64
	// SampledAt is when the broker took the sample (zero when unknown):
	// the counters are at least as new as that.
	SampledAt time.Time
}

// Stats reads queue counters from the management API.
type Stats interface {
	Counters(ctx context.Context, queue string) (QueueStats, error)
}

// Declarer declares queues (the parking queue).
type Declarer interface {
	// DeclareQueue declares a durable classic queue if it does not exist;
	// an existing queue is left as it is.
	DeclareQueue(ctx context.Context, name string) error
}
