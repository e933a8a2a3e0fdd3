package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine/letter"
)

// Errors the adapters return, checked with errors.Is.
var (
	// ErrQueueNotFound means a queue does not exist on the broker.
	ErrQueueNotFound = errors.New("queue not found")
	// ErrBrokerUnavailable means RabbitMQ (AMQP or management) could not be reached.
	ErrBrokerUnavailable = errors.New("broker unavailable")
	// ErrManagementDown means the management HTTP API did not answer in
	// time (or refused, or failed) and is being left alone for a while:
	// a call that needs it failed at once rather than wait. It comes
	// with ErrBrokerUnavailable. The API only ever adds to what AMQP
	// shows (statistics, bindings, a quorum queue's delivery limit).
	ErrManagementDown = errors.New("management API not answering")
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
	// ErrBudgetUnknown means a read of a quorum queue was refused because
	// its read budget (delivery limit, broker version) cannot be told.
	ErrBudgetUnknown = errors.New("read budget unknown")
	// ErrHeldElsewhere means a read that had to see a whole queue (to say
	// a message is not there) did not: another client held or took some
	// of its messages.
	ErrHeldElsewhere = errors.New("another client held messages of the queue")
)

// Clock tells the time and waits. The engine reads the time and waits
// (polls, timeouts, grace periods, back-offs) only through it, so a test
// can move time on instead of sleeping. Times the engine compares with the
// broker's own (management samples, death times) assume a clock that tells
// wall time; a clock moved ahead only makes a sample look older. Deadlines
// of single network calls (context.WithTimeout) are real time.
type Clock interface {
	// Now tells the time.
	Now() time.Time
	// After delivers the time once d has passed by this clock. A caller
	// that stops waiting may drop the channel.
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// After returns time.After(d); a timer nobody waits on any more is
// collected, fired or not.
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// QueueInfo is what Inspect learns about a queue right now: whether it
// exists, its depth and consumers as a client sees them (a passive
// declare: exact and current), and its type, delivery limit and read
// budget (the management API and the read marks). Compare QueueCounters,
// the management API's lagging counters.
type QueueInfo struct {
	Name   string `json:"name"`
	Exists bool   `json:"exists"`
	// Ready is the number of messages ready for delivery.
	Ready int `json:"ready"`
	// Consumers is the number of live consumers.
	Consumers int `json:"consumers"`
	// Type is "classic", "quorum" or "stream" ("" when unknown).
	Type string `json:"type,omitempty"`
	// DeliveryLimit is the quorum queue's effective delivery limit: the
	// x-delivery-limit argument, the policy or operator policy, or RabbitMQ
	// 4.0+'s default of 20; 0 when none is known (a classic queue has none).
	DeliveryLimit int `json:"delivery_limit,omitempty"`
	// The fields below describe the queue's read budget (see budget.go).
	ReadCounts
}

// ScanInfo describes a completed scan.
type ScanInfo struct {
	// Read is how many messages the scan saw.
	Read int
	// QueueType is the scanned queue's type.
	QueueType string
	// Duration is how long the scan took, requeue included.
	Duration time.Duration
	// Coverage is how much of the queue the scan saw.
	Coverage Coverage
}

// Coverage says how much of a queue one read saw, by the broker's counts
// (never by a pause in deliveries).
type Coverage struct {
	// Queued is how many messages the queue held when the read began: the
	// ready count, plus what other clients held unacknowledged when the
	// broker reported any.
	Queued int `json:"queued"`
	// Ready is the queue's ready count when the read began: what the read
	// set out to see.
	Ready int `json:"ready"`
	// Read is how many messages the read saw.
	Read int `json:"read"`
	// HeldElsewhere is how many messages other clients held or took (an
	// estimate from the broker's counts; 0 when none are known).
	HeldElsewhere int `json:"held_elsewhere,omitempty"`
	// OtherConsumers is how many other consumers the queue had when the
	// read began (after waiting briefly for them to let go).
	OtherConsumers int `json:"other_consumers,omitempty"`
	// Short is set when the broker had no more messages for the read
	// before it saw all it set out to: another client holds or took them.
	Short bool `json:"short,omitempty"`
	// Cut is set when the read ended before the end of the queue for
	// another reason: its caller stopped it (a limit, a satisfied move,
	// cancellation) or an error broke it.
	Cut bool `json:"cut,omitempty"`
}

// Whole reports whether the read saw every message of the queue, with no
// other client holding any: only such a read can say a message is not
// there.
func (c Coverage) Whole() bool {
	return !c.Short && !c.Cut && c.OtherConsumers == 0 && c.HeldElsewhere == 0 && c.Read >= c.Ready
}

// Broker is what the engine needs from RabbitMQ.
type Broker interface {
	// Inspect reports whether a queue exists, its ready count and its
	// consumers. A missing queue is QueueInfo{Exists: false} and a nil
	// error; an unreachable broker is ErrBrokerUnavailable.
	Inspect(ctx context.Context, queue string) (QueueInfo, error)
	// Look is Inspect by a passive declare alone: whether the queue
	// exists, its ready count and its consumers, with none of what the
	// management API and the read marks add (Type, DeliveryLimit,
	// ReadCounts), so that a slow API or store never delays it (the
	// pacer samples its targets so, every half second).
	Look(ctx context.Context, queue string) (QueueInfo, error)
	// Scan reads every message of queue (those present when it starts) and
	// calls visit for each, in queue order, without changing the queue:
	// afterwards the same messages are there in the same order. An error from
	// visit ends the scan early; every message is still given back.
	Scan(ctx context.Context, queue string, visit func(letter.Message) error) (ScanInfo, error)
	// Route returns the queues that exchange's bindings route routingKey to.
	Route(ctx context.Context, exchange, routingKey string) ([]string, error)
	// DeclareQueue declares a durable classic queue (the parking queue) if
	// it does not exist; an existing queue is left as it is.
	DeclareQueue(ctx context.Context, name string) error
}

// QueueCounters are a queue's counters from the management API (a
// CounterReader reads them). They lag the
// broker by the statistics interval (5 s by default) and are per-queue
// totals shared by every client.
type QueueCounters struct {
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
	// Listed is how many consumers the API listed, and NoAck how many of
	// them take messages without acknowledgements (auto-ack). Unlike the
	// counters, the list is not a sample: a consumer that goes leaves it
	// at once; one that subscribed since the last statistics sample is
	// not in it yet (so Listed is below the live count of a passive
	// declare until then).
	Listed, NoAck int
	// Lapsed is true when Publish … Redeliver mean nothing: the answer
	// left them out, or showed less than an earlier one for the queue,
	// and the broker has not sampled the queue since to confirm that it
	// now counts that little (a reset, or the queue declared again).
	Lapsed bool
}

// ConsumerConn is one consumer of a queue and the connection it runs on,
// as the management API lists them: when the connection was opened and
// what the client says it is (client_properties; "" when it does not say).
type ConsumerConn struct {
	ConnectedAt    time.Time `json:"connected_at"`
	Product        string    `json:"product,omitempty"`
	Version        string    `json:"version,omitempty"`
	ConnectionName string    `json:"connection_name,omitempty"`
}

// ConsumerLister lists a queue's consumers with their connections (the
// management API: a hint; an API that is down is an error at once, never
// a wait). A connection it cannot date has a zero ConnectedAt.
type ConsumerLister interface {
	QueueConsumers(ctx context.Context, queue string) ([]ConsumerConn, error)
}

// CounterReader reads a queue's QueueCounters from the management API.
type CounterReader interface {
	Counters(ctx context.Context, queue string) (QueueCounters, error)
}

// ScanObserver is told about every completed preview scan: the messages
// read and how long it took.
type ScanObserver interface {
	ScanObserved(messages int, d time.Duration)
}

// A paced replay outlives the loss of the broker node it worked through.
// When a step ends because the connection was lost (the node died, was
// restarted for an upgrade, or closed the connection), the run does not
// stop: it waits until the broker answers again — the adapter dials the
// next node of its list, or the load balancer picks a live one — and then
// for the messages its reader held through the lost connection. A quorum
// queue keeps what a consumer on a vanished node held checked out for that
// node until the node is back or forgotten: those messages are neither
// sent nor missing, and the step that follows would not find them. So the
// run waits until the broker reports nothing unacknowledged on the DLQ (as
// findRest does before it calls anything missing), saying so in the
// record's note, settles the step the loss cut, reconciles its counts with
// the DLQ (engine/replay/reconcile.go: originals acked just before the loss that came
// back are duplicates), and goes on with its plan. Copies in flight at the
// loss are in doubt, as after any lost connection; a paced replay that
// goes on sends them again first, in the same run, marked
// PossibleDuplicateHeader exactly as resume resend=in-doubt does
// (resendAfterLoss), so that it can finish without a person's action: at
// its pace only the few copies in flight at the loss are in doubt.
//
// An unpaced replay stops instead, resumable: at full speed a lost
// connection leaves many copies in doubt, which a person should look at
// before it goes on. Before it stops it settles the cut step and
// reconciles its counts too, when the broker answers, and its note says
// what is left.

// EventWaiting reports a running replay that waits for the broker after
// losing its node (the text says for what).
const EventWaiting EventKind = "waiting"

// NodeLostError is a broker connection that was established and then lost
// (its node died or closed it), as opposed to one that could not be made.
// It is ErrBrokerUnavailable too.
type NodeLostError struct {
	// Node names the node the connection went to (host:port, no
	// credentials).
	Node string
	Err  error
}

func (e *NodeLostError) Error() string {
	return fmt.Sprintf("%v: lost the connection through node %s: %v", ErrBrokerUnavailable, e.Node, e.Err)
}

// Unwrap makes errors.Is find ErrBrokerUnavailable and the cause.
func (e *NodeLostError) Unwrap() []error { return []error{ErrBrokerUnavailable, e.Err} }
