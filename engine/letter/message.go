package letter

import "time"

// Message is one message as read from a queue: the parts the engine needs to
// derive its metadata. The adapter keeps the full delivery itself, so a
// replay can republish every property unchanged.
type Message struct {
	// Seq is the message's 0-based position in the queue when it was read.
	Seq int
	// Headers are the AMQP headers as decoded by the client library
	// (nested tables are map[string]any, arrays []any).
	Headers map[string]any
	// MessageID is the AMQP message_id property ("" when absent).
	MessageID string
	// Timestamp is the AMQP timestamp property (zero when absent).
	Timestamp time.Time
	// ContentType is the AMQP content_type property.
	ContentType string
	// Body is the payload. It is only valid during the visit that received
	// it: keep an excerpt, never the slice.
	Body []byte
	// Redelivered is the delivery's redelivered flag (set by tap reads: the
	// message may have been handled before).
	Redelivered bool
}

// Dialect names the convention that dead-lettered a message.
type Dialect string

// The dialects dlqbot reads (docs/design.md "Dead-letter dialects").
const (
	DialectRabbitMQ    Dialect = "rabbitmq"    // broker dead-lettering: x-death, x-first-death-*
	DialectSpring      Dialect = "spring"      // Spring AMQP RepublishMessageRecoverer
	DialectMassTransit Dialect = "masstransit" // MassTransit <queue>_error / _skipped
	DialectNServiceBus Dialect = "nservicebus" // NServiceBus error queue
	DialectRascal      Dialect = "rascal"      // rascal (Node.js): headers.rascal
	DialectInHouse     Dialect = "inhouse"     // the configured in-house headers (HeaderDialect)
	DialectUnknown     Dialect = "unknown"     // no convention recognised
)

// Reason is why a message was dead-lettered.
type Reason string

// The broker's dead-letter reasons, plus the framework ones.
const (
	ReasonRejected      Reason = "rejected"
	ReasonExpired       Reason = "expired"
	ReasonMaxLen        Reason = "maxlen"
	ReasonDeliveryLimit Reason = "delivery_limit"
	ReasonException     Reason = "exception" // a framework republished it after a handler threw
	ReasonSkipped       Reason = "skipped"   // MassTransit _skipped: no consumer for the type
	ReasonUnknown       Reason = "unknown"
)

// Meta is what the engine derives from one dead-lettered message.
type Meta struct {
	// ID is a stable fingerprint of the copy: the same on every scan,
	// shared by identical copies (16 lowercase hex characters).
	ID string `json:"id"`
	// Seq is the position in the DLQ when it was scanned.
	Seq     int     `json:"seq"`
	Dialect Dialect `json:"dialect"`
	// Source is the queue the message should go back to; "" when it cannot
	// be derived (SourceNote then says why). Never guessed.
	Source     string `json:"source,omitempty"`
	SourceNote string `json:"source_note,omitempty"`
	// BadTarget is the queue the headers named when it is not a valid
	// queue name (QueueNameProblem): Source is then "" and the message has
	// no valid target. Shown only to readers.
	BadTarget string `json:"bad_target,omitempty"`
	// Exchange and RoutingKeys are the original route, where known.
	Exchange    string   `json:"exchange,omitempty"`
	RoutingKeys []string `json:"routing_keys,omitempty"`
	// NeedsRoute is set when the dialect names an exchange and routing key
	// rather than a queue (Spring with a non-default exchange): Source must
	// then be resolved through the exchange's bindings (engine's Broker.Route).
	NeedsRoute bool   `json:"needs_route,omitempty"`
	Reason     Reason `json:"reason"`
	// Attempts is how many times the message was tried in its source: what
	// the framework recorded plus the broker's x-death count for that queue
	// (MT-Fault-RetryCount+1, rascal's republished + forwarded + x-death,
	// the in-house attempts header + x-death, …); 0 when unknown.
	Attempts   int       `json:"attempts"`
	FirstDeath time.Time `json:"first_death,omitzero"`
	LastDeath  time.Time `json:"last_death,omitzero"`
	// ExceptionType and Exception are the failure's type and message where a
	// framework recorded one.
	ExceptionType string `json:"exception_type,omitempty"`
	Exception     string `json:"exception,omitempty"`
	// FailureGroup is Exception normalised (numbers, ids, timestamps, hex
	// and UUIDs folded), else the reason.
	FailureGroup string `json:"failure_group"`
	// ReplayCount is x-replay-count; ReplayID is x-replay-id (the last
	// replay that sent this copy), "" when never replayed.
	ReplayCount int    `json:"replay_count"`
	ReplayID    string `json:"replay_id,omitempty"`
	// Returned is true when this copy carries a replay id AND a death newer
	// than that replay (a new x-death, or fresh exception headers): it came
	// back. A copy with a replay id but no new death is not returned.
	Returned  bool   `json:"returned,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	Size      int    `json:"size"`
	// Excerpt is a short printable prefix of the body (filled by the caller
	// for the first few messages only).
	Excerpt string `json:"excerpt,omitempty"`
	// Headers are the message's headers with a single value (HeaderString),
	// redacted as the excerpt is (filled by the caller with Excerpt; see
	// the engine's redactor.shownHeaders).
	Headers map[string]string `json:"headers,omitempty"`
	// Refusal is set when the message carries a framework marker that makes
	// its consumer refuse a replayed copy (rascal's immediateNack): it says
	// what the consumer would do and what the replay does about it.
	Refusal string `json:"refusal,omitempty"`
	// Problems lists headers that could not be read (wrong types, missing
	// fields); the rest of Meta holds what could be.
	Problems []string `json:"problems,omitempty"`
}
