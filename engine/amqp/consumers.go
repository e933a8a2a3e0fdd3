package amqp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stroma/dlqbot/engine"
)

// consumerDetailsJSON is the part of GET /api/queues/{vhost}/{name} that
// names the connection each consumer runs on.
type consumerDetailsJSON struct {
	ConsumerDetails []struct {
		ChannelDetails struct {
			ConnectionName string `json:"connection_name"`
		} `json:"channel_details"`
	} `json:"consumer_details"`
}

// connectionJSON is the part of GET /api/connections/{name} (and of the
// vhost's connection list) that dates
// the connection and says what the client is.
type connectionJSON struct {
	Name string `json:"name"`
	// ConnectedAt is milliseconds since the epoch (0: not reported).
	ConnectedAt      int64 `json:"connected_at"`
	ClientProperties struct {
		Product        any `json:"product"`
		Version        any `json:"version"`
		ConnectionName any `json:"connection_name"`
	} `json:"client_properties"`
}

// oneByOne is how many distinct connections QueueConsumers asks about
// one request each; with more it lists the vhost's connections once.
const oneByOne = 8

// QueueConsumers lists queue's consumers with the connection each runs on
// (engine.ConsumerLister): one request for the queue, then one per
// distinct connection, or one for all the vhost's connections when there
// are more than oneByOne. A consumer whose connection closed in between,
// or that the API names no connection for, has a zero ConnectedAt. A
// missing queue is engine.ErrQueueNotFound; an API that is down is
// engine.ErrManagementDown at once (the breaker), never a wait beyond
// Config.HTTPTimeout per request.
func (b *Broker) QueueConsumers(ctx context.Context, queue string) ([]engine.ConsumerConn, error) {
	var q consumerDetailsJSON
	path := "/api/queues/" + url.PathEscape(b.mgmt.vhost) + "/" + url.PathEscape(queue)
	if err := b.mgmt.get(ctx, path, &q); err != nil {
		if errors.Is(err, errMgmtNotFound) {
			err = engine.ErrQueueNotFound
		}
		return nil, fmt.Errorf("amqp: consumers of %s: %w", queue, err)
	}
	conns := map[string]engine.ConsumerConn{}
	for _, cd := range q.ConsumerDetails {
		if name := cd.ChannelDetails.ConnectionName; name != "" {
			conns[name] = engine.ConsumerConn{}
		}
	}
	if len(conns) > oneByOne {
		all, err := b.mgmt.connections(ctx)
		if err != nil {
			return nil, fmt.Errorf("amqp: consumers of %s: connections: %w", queue, err)
		}
		for name := range conns {
			conns[name] = all[name]
		}
	} else {
		for name := range conns {
			c, err := b.mgmt.connection(ctx, name)
			if err != nil && !errors.Is(err, errMgmtNotFound) {
				return nil, fmt.Errorf("amqp: consumers of %s: connection %q: %w", queue, name, err)
			}
			conns[name] = c
		}
	}
	out := make([]engine.ConsumerConn, 0, len(q.ConsumerDetails))
	for _, cd := range q.ConsumerDetails {
		out = append(out, conns[cd.ChannelDetails.ConnectionName])
	}
	return out, nil
}

// connection reads one connection's opening time and client properties.
func (m *mgmtClient) connection(ctx context.Context, name string) (engine.ConsumerConn, error) {
	var cj connectionJSON
	if err := m.get(ctx, "/api/connections/"+url.PathEscape(name), &cj); err != nil {
		return engine.ConsumerConn{}, err
	}
	return cj.conn(), nil
}

// connections reads every connection of the vhost, by name, asking only
// for the columns it uses.
func (m *mgmtClient) connections(ctx context.Context) (map[string]engine.ConsumerConn, error) {
	var cjs []connectionJSON
	path := "/api/vhosts/" + url.PathEscape(m.vhost) + "/connections?columns=name,connected_at,client_properties"
	if err := m.getList(ctx, path, &cjs); err != nil {
		return nil, err
	}
	out := make(map[string]engine.ConsumerConn, len(cjs))
	for _, cj := range cjs {
		out[cj.Name] = cj.conn()
	}
	return out, nil
}

func (cj *connectionJSON) conn() engine.ConsumerConn {
	c := engine.ConsumerConn{
		Product:        clientString(cj.ClientProperties.Product),
		Version:        clientString(cj.ClientProperties.Version),
		ConnectionName: clientString(cj.ClientProperties.ConnectionName),
	}
	if cj.ConnectedAt > 0 {
		c.ConnectedAt = time.UnixMilli(cj.ConnectedAt).UTC()
	}
	return c
}

// clientString is a client property as text: clients send strings, but a
// property is any AMQP value, which the API may render otherwise; those,
// long values and text with control characters (shown on terminals and in
// Slack as they are) are left out.
func clientString(v any) string {
	s, ok := v.(string)
	if !ok || len(s) > 200 || !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return ""
	}
	return s
}
