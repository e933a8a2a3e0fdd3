package amqp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.QueueLister = (*Broker)(nil)

// queueListJSON is one entry of GET /api/queues/{vhost}?columns=….
type queueListJSON struct {
	queueArgsJSON
	Ready     int `json:"messages_ready"`
	Consumers int `json:"consumers"`
}

// vhostBindingJSON is one entry of GET /api/bindings/{vhost}.
type vhostBindingJSON struct {
	Source          string `json:"source"`
	Destination     string `json:"destination"`
	DestinationType string `json:"destination_type"`
}

// ListQueues lists the vhost's queues with their ready messages and
// consumers, and which are dead-letter targets: a queue another queue
// dead-letters into through the default exchange by name, or one bound
// to an exchange another queue names as its dead-letter exchange (the
// routing key is not followed: a queue bound to a dead-letter exchange
// is taken for a dead-letter queue). Two requests to the management API.
func (b *Broker) ListQueues(ctx context.Context) ([]engine.QueueListing, error) {
	m := b.mgmt
	var qs []queueListJSON
	path := "/api/queues/" + url.PathEscape(m.vhost) + "?columns=name,messages_ready,consumers,arguments,effective_policy_definition"
	if err := m.getList(ctx, path, &qs); err != nil {
		return nil, fmt.Errorf("amqp: list queues: %w", err)
	}
	straight := map[string]bool{} // queues dead-lettered into by name
	dlxs := map[string]bool{}     // named dead-letter exchanges
	for _, q := range qs {
		dlx, key, ok := q.deadLetter()
		switch {
		case !ok:
		case dlx == "" && key != "":
			straight[key] = true
		case dlx != "":
			dlxs[dlx] = true
		}
	}
	bound := map[string]bool{}
	if len(dlxs) > 0 {
		var bs []vhostBindingJSON
		if err := m.getList(ctx, "/api/bindings/"+url.PathEscape(m.vhost), &bs); err != nil {
			return nil, fmt.Errorf("amqp: list bindings: %w", err)
		}
		for _, bd := range bs {
			if bd.DestinationType == "queue" && dlxs[bd.Source] {
				bound[bd.Destination] = true
			}
		}
	}
	out := make([]engine.QueueListing, 0, len(qs))
	for _, q := range qs {
		out = append(out, engine.QueueListing{Name: q.Name, Messages: q.Ready, Consumers: q.Consumers,
			DeadLetterTarget: straight[q.Name] || bound[q.Name]})
	}
	return out, nil
}

// deadLetter is q's dead-letter exchange and routing key (argument, else
// policy; the argument wins, as in the broker); ok is false when it has no
// dead-letter exchange.
func (q queueArgsJSON) deadLetter() (dlx, key string, ok bool) {
	var policy map[string]any
	if len(q.EffectivePolicy) > 0 {
		_ = json.Unmarshal(q.EffectivePolicy, &policy) // [] on older brokers: ignored
	}
	pick := func(arg, pol string) (string, bool) {
		if v, ok := q.Arguments[arg].(string); ok {
			return v, true
		}
		if v, ok := policy[pol].(string); ok {
			return v, true
		}
		return "", false
	}
	dlx, ok = pick("x-dead-letter-exchange", "dead-letter-exchange")
	key, _ = pick("x-dead-letter-routing-key", "dead-letter-routing-key")
	return dlx, key, ok
}

// QueueDepths is every queue of the vhost with its messages (ready and
// unacknowledged), from one request to the management API's queue list:
// what the DLQ watch samples each tick. It reads no message; the counts
// are the broker's statistics, a few seconds old.
func (b *Broker) QueueDepths(ctx context.Context) (map[string]int, error) {
	m := b.mgmt
	var qs []struct {
		Name     string `json:"name"`
		Messages int    `json:"messages"`
	}
	if err := m.getList(ctx, "/api/queues/"+url.PathEscape(m.vhost)+"?columns=name,messages", &qs); err != nil {
		return nil, fmt.Errorf("amqp: queue depths: %w", err)
	}
	out := make(map[string]int, len(qs))
	for _, q := range qs {
		out[q.Name] = q.Messages
	}
	return out, nil
}
