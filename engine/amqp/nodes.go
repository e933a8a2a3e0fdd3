package amqp

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/redact"
)

// A cluster is given as a comma-separated list of its nodes' URLs, in
// Config.URL (AMQP) and Config.ManagementURL (the management API), as
// REDIS_URL lists a Redis Cluster's nodes; one URL (a single broker, or a
// load balancer in front of a cluster) is a list of one. This file is the
// one place that splits and checks such a list.

// Nodes splits a comma-separated list of URLs, trimming spaces. An empty
// entry (",," or a trailing comma) is an error, so a typo never silently
// drops a node.
func Nodes(list string) ([]string, error) {
	parts := strings.Split(list, ",")
	out := make([]string, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, fmt.Errorf("entry %d of %d is empty (nodes are separated by single commas)", i+1, len(parts))
		}
		out = append(out, p)
	}
	return out, nil
}

// RedactList is list with every node's password hidden (redact.URL on
// each entry): a password in the second node's URL is never echoed.
func RedactList(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		parts[i] = redact.URL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

// amqpNode is one node of the AMQP URL list.
type amqpNode struct {
	url      string // as given, with credentials
	endpoint string // for messages: without the password
	uri      amqp.URI
}

// parseAMQPNodes checks an AMQP URL list: every entry an amqp(s) URL, all
// with the same vhost (one broker's nodes serve one vhost to dlqbot).
func parseAMQPNodes(list string) ([]amqpNode, error) {
	urls, err := Nodes(list)
	if err != nil {
		return nil, fmt.Errorf("amqp: invalid AMQP URL list: %w", err)
	}
	nodes := make([]amqpNode, 0, len(urls))
	for _, u := range urls {
		uri, err := amqp.ParseURI(u)
		if err != nil {
			return nil, fmt.Errorf("amqp: invalid AMQP URL %q: %w", redact.URL(u), err)
		}
		if len(nodes) > 0 && uri.Vhost != nodes[0].uri.Vhost {
			return nil, fmt.Errorf("amqp: the AMQP URLs name different vhosts (%q in %s, %q in %s): list the nodes of one vhost",
				nodes[0].uri.Vhost, nodes[0].endpoint, uri.Vhost, redact.URL(u))
		}
		nodes = append(nodes, amqpNode{url: u, endpoint: hostOf(u), uri: uri})
	}
	return nodes, nil
}

// mgmtNode is one node of the management URL list.
type mgmtNode struct {
	base       string // scheme://host[:port][/prefix], no user info, no trailing slash
	user, pass string
	auth       bool
}

// parseMgmtNodes checks a management URL list: every entry an http(s) URL
// with a host.
func parseMgmtNodes(list string) ([]mgmtNode, error) {
	urls, err := Nodes(list)
	if err != nil {
		return nil, fmt.Errorf("amqp: invalid management URL list: %w", err)
	}
	nodes := make([]mgmtNode, 0, len(urls))
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("amqp: invalid management URL %q: %w", redact.URL(raw), errors.Unwrap(err))
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("amqp: invalid management URL %q: want http(s)://[user:password@]host:port", redact.URL(raw))
		}
		var n mgmtNode
		if u.User != nil {
			n.user = u.User.Username()
			n.pass, _ = u.User.Password()
			n.auth = true
		}
		u.User = nil
		u.RawQuery, u.Fragment = "", ""
		n.base = strings.TrimRight(u.String(), "/")
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// hostOf names a node by its host:port, as messages do ("node
// 127.0.0.1:5692").
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return redact.URL(raw)
	}
	return u.Host
}
