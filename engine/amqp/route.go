package amqp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// maxRouteDepth bounds how many exchange-to-exchange hops Route follows.
const maxRouteDepth = 5

// Route returns the queues (sorted, without duplicates; nil when none) that exchange's
// bindings route routingKey to, as the management API lists them: direct
// exchanges match the key exactly, topic exchanges by pattern (* one word,
// # zero or more), fanout exchanges route to every binding. Exchange-to-
// exchange bindings are followed (up to maxRouteDepth hops), and so is an
// alternate-exchange argument when nothing matched. The default exchange
// ("" or "amq.default") routes to the queue named by the key, if it exists.
// A headers exchange (or a plugin type) cannot be resolved from a routing
// key alone and is an error, as is a missing exchange. An unreachable broker
// is engine.ErrBrokerUnavailable.
func (b *Broker) Route(ctx context.Context, exchange, routingKey string) ([]string, error) {
	if exchange == "" || exchange == "amq.default" {
		if routingKey == "" { // "" would name the channel's last declared queue
			return nil, nil
		}
		_, found, err := b.declarePassive(ctx, routingKey)
		if err != nil {
			return nil, fmt.Errorf("amqp: route %q %q: %w", exchange, routingKey, err)
		}
		if !found {
			return nil, nil
		}
		return []string{routingKey}, nil
	}
	rt := router{b: b, key: routingKey, seen: map[string]bool{}, queues: map[string]bool{}}
	if err := rt.follow(ctx, exchange, 0); err != nil {
		return nil, fmt.Errorf("amqp: route %q %q: %w", exchange, routingKey, err)
	}
	if len(rt.queues) == 0 {
		return nil, nil
	}
	out := make([]string, 0, len(rt.queues))
	for q := range rt.queues {
		out = append(out, q)
	}
	slices.Sort(out)
	return out, nil
}

// router walks the binding graph for one routing key.
type router struct {
	b      *Broker
	key    string
	seen   map[string]bool // exchanges already followed (bindings may form cycles)
	queues map[string]bool
}

func (rt *router) follow(ctx context.Context, exchange string, depth int) error {
	if rt.seen[exchange] || depth > maxRouteDepth {
		return nil
	}
	rt.seen[exchange] = true
	x, err := rt.b.mgmt.exchange(ctx, exchange)
	if errors.Is(err, errMgmtNotFound) {
		return fmt.Errorf("exchange %q not found", exchange)
	}
	if err != nil {
		return err
	}
	kind := x.Type
	if kind == "x-delayed-message" { // the delayed-message plugin routes as x-delayed-type
		kind, _ = x.Arguments["x-delayed-type"].(string)
	}
	switch kind {
	case "direct", "topic", "fanout":
	case "headers":
		return fmt.Errorf("exchange %q is a headers exchange: it routes on message headers, which a routing key cannot resolve", exchange)
	default:
		return fmt.Errorf("exchange %q has type %q, which cannot be resolved from a routing key", exchange, x.Type)
	}
	bindings, err := rt.b.mgmt.bindings(ctx, exchange)
	if err != nil {
		return err
	}
	before := len(rt.queues)
	for _, bd := range bindings {
		if !bindingMatches(kind, bd.RoutingKey, rt.key) {
			continue
		}
		switch bd.DestinationType {
		case "queue":
			rt.queues[bd.Destination] = true
		case "exchange":
			if err := rt.follow(ctx, bd.Destination, depth+1); err != nil {
				return err
			}
		}
	}
	if len(rt.queues) == before {
		if ae, ok := x.Arguments["alternate-exchange"].(string); ok && ae != "" {
			return rt.follow(ctx, ae, depth+1)
		}
	}
	return nil
}

// bindingMatches reports whether a binding key of an exchange of the given
// kind matches a routing key.
func bindingMatches(kind, bindingKey, routingKey string) bool {
	switch kind {
	case "fanout":
		return true
	case "direct":
		return bindingKey == routingKey
	case "topic":
		return topicMatch(words(bindingKey), words(routingKey))
	}
	return false
}

// words splits a topic key into its dot-separated words; the empty key has
// none, as in the broker.
func words(key string) []string {
	if key == "" {
		return nil
	}
	return strings.Split(key, ".")
}

// topicMatch matches dot-separated words against a topic pattern: "*"
// stands for exactly one word, "#" for zero or more.
func topicMatch(pattern, words []string) bool {
	// memo[i][j] records a failed attempt at pattern[i:] against words[j:],
	// which keeps patterns with several # linear in practice.
	failed := make(map[[2]int]bool)
	var match func(i, j int) bool
	match = func(i, j int) bool {
		for i < len(pattern) {
			if failed[[2]int{i, j}] {
				return false
			}
			switch pattern[i] {
			case "#":
				for k := j; k <= len(words); k++ {
					if match(i+1, k) {
						return true
					}
				}
				failed[[2]int{i, j}] = true
				return false
			case "*":
				if j >= len(words) {
					return false
				}
			default:
				if j >= len(words) || words[j] != pattern[i] {
					return false
				}
			}
			i++
			j++
		}
		return j == len(words)
	}
	return match(0, 0)
}
