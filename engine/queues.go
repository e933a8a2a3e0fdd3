package engine

import (
	"context"
	"strings"
)

// QueueListing is one queue of the vhost as the broker lists it (the
// management API's queue list: counts lag by its statistics interval).
type QueueListing struct {
	Name string `json:"name"`
	// Messages is the queue's ready messages; Consumers its consumers.
	Messages  int `json:"messages"`
	Consumers int `json:"consumers"`
	// DeadLetterTarget is set when another queue dead-letters into this
	// one: straight through the default exchange, or through its
	// dead-letter exchange, to which this queue is bound.
	DeadLetterTarget bool `json:"dead_letter_target,omitempty"`
}

// QueueLister lists the vhost's queues in one request or two (the
// management API); the amqp adapter implements it.
type QueueLister interface {
	ListQueues(ctx context.Context) ([]QueueListing, error)
}

// dlqSuffixes end the names of queues named as dead-letter queues are by
// convention (RabbitMQ's own examples, MassTransit's _error, Spring's
// .dlq).
var dlqSuffixes = []string{".dlq", "-dlq", "_dlq", "_error", ".error", "-error"}

// NamedLikeDLQ reports whether name is named as dead-letter queues are by
// convention: it ends .dlq, -dlq, _dlq, _error, .error or -error (any
// case).
func NamedLikeDLQ(name string) bool {
	l := strings.ToLower(name)
	for _, s := range dlqSuffixes {
		if strings.HasSuffix(l, s) && len(l) > len(s) {
			return true
		}
	}
	return false
}
