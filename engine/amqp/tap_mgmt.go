package amqp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// queueBindingJSON is one entry of GET /api/queues/{vhost}/{name}/bindings.
type queueBindingJSON struct {
	Source          string         `json:"source"`
	Destination     string         `json:"destination"`
	DestinationType string         `json:"destination_type"`
	RoutingKey      string         `json:"routing_key"`
	Arguments       map[string]any `json:"arguments"`
}

// key identifies a binding by what routes: exchange, routing key and
// arguments (canonical JSON: encoding/json sorts map keys).
func (b queueBindingJSON) key() string {
	args, _ := json.Marshal(b.Arguments)
	if len(b.Arguments) == 0 {
		args = []byte("{}")
	}
	return b.Source + "\x00" + b.RoutingKey + "\x00" + string(args)
}

// queueBindings lists the bindings that route to queue through a named
// exchange (the implicit default-exchange binding is left out). A missing
// queue is errMgmtNotFound.
func (m *mgmtClient) queueBindings(ctx context.Context, queue string) ([]queueBindingJSON, error) {
	var all []queueBindingJSON
	path := "/api/queues/" + url.PathEscape(m.vhost) + "/" + url.PathEscape(queue) + "/bindings"
	if err := m.get(ctx, path, &all); err != nil {
		return nil, err
	}
	out := all[:0]
	for _, b := range all {
		if b.Source != "" {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out, nil
}

// queueArgsJSON is one entry of GET /api/queues/{vhost}?columns=….
type queueArgsJSON struct {
	Name            string          `json:"name"`
	Arguments       map[string]any  `json:"arguments"`
	EffectivePolicy json.RawMessage `json:"effective_policy_definition"`
}

// deadLettersStraightTo reports whether q dead-letters through the default
// exchange with dlq as the routing key (argument, else policy; the argument
// wins, as in the broker).
func (q queueArgsJSON) deadLettersStraightTo(dlq string) bool {
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
	dlx, ok := pick("x-dead-letter-exchange", "dead-letter-exchange")
	if !ok || dlx != "" {
		return false
	}
	key, _ := pick("x-dead-letter-routing-key", "dead-letter-routing-key")
	return key == dlq
}

// directFeeders lists the queues of the vhost that dead-letter straight
// into dlq through the default exchange (no tap can see those), at most
// max names.
func (m *mgmtClient) directFeeders(ctx context.Context, dlq string, max int) ([]string, error) {
	var qs []queueArgsJSON
	path := "/api/queues/" + url.PathEscape(m.vhost) + "?columns=name,arguments,effective_policy_definition"
	if err := m.getList(ctx, path, &qs); err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	var out []string
	for _, q := range qs {
		if q.Name != dlq && q.deadLettersStraightTo(dlq) {
			out = append(out, q.Name)
			if len(out) == max {
				break
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// quoteNames quotes up to three names for a message, "and N more" after.
func quoteNames(names []string) string {
	var b strings.Builder
	for i, n := range names {
		if i == 3 {
			fmt.Fprintf(&b, " and %d more", len(names)-3)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", n)
	}
	return b.String()
}
