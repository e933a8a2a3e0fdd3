package amqp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/redact"
)

// heartbeat is the AMQP heartbeat interval asked for: a dead broker is
// noticed within about two of them.
const heartbeat = 10 * time.Second

// connHolder owns the Broker's AMQP connection: dialled on first use,
// re-dialled when the previous one was lost. With several nodes (a
// cluster's AMQP_URL list) it tries them in order, beginning with the
// first, and after losing a connection beginning with the node after the
// one it lost: a node that just died (or is restarting) is tried last.
// Order, not shuffling, keeps which node a replica uses predictable; a
// load balancer in front of the cluster spreads replicas instead.
type connHolder struct {
	b      *Broker
	mu     sync.Mutex
	conn   *amqp.Connection
	closed bool
	// cur is the node of conn (index into b.nodes); next is the node the
	// next dial tries first.
	cur, next int
}

// node names the node of the connection (the current one, or the last one
// lost when none is open yet), host:port without credentials.
func (h *connHolder) node() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.b.nodes[h.cur].endpoint
}

// get returns a live connection, dialling one if there is none.
func (h *connHolder) get(ctx context.Context) (*amqp.Connection, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrBrokerClosed
	}
	if h.conn != nil && !h.conn.IsClosed() {
		return h.conn, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if h.conn != nil {
		// Lost: begin with the next node.
		h.next = (h.cur + 1) % len(h.b.nodes)
		h.conn = nil
	}
	var errs []error
	for k := range h.b.nodes {
		i := (h.next + k) % len(h.b.nodes)
		conn, err := h.dial(ctx, h.b.nodes[i])
		if err == nil {
			h.conn, h.cur, h.next = conn, i, i
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if len(h.b.nodes) > 1 {
			err = fmt.Errorf("%s: %w", h.b.nodes[i].endpoint, err)
		}
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return nil, unavailable("cannot connect to "+redact.URL(h.b.nodes[0].url), errs[0])
	}
	return nil, unavailable(fmt.Sprintf("cannot connect to any of the %d nodes", len(errs)), errors.Join(errs...))
}

// dial opens a connection to node; ctx bounds the TCP connect, and
// DialTimeout (or ctx's deadline, when earlier) the whole handshake.
func (h *connHolder) dial(ctx context.Context, node amqpNode) (*amqp.Connection, error) {
	cfg := h.b.cfg
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(cfg.ConnectionName)
	dialer := func(network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: cfg.DialTimeout}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		// The library clears the deadline once the handshake is done.
		deadline := time.Now().Add(cfg.DialTimeout)
		if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
			deadline = dl
		}
		if err := c.SetDeadline(deadline); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	conn, err := amqp.DialConfig(node.url, amqp.Config{
		Properties: props,
		Dial:       dialer,
		Heartbeat:  heartbeat,
	})
	if err != nil {
		return nil, err
	}
	return conn, nil
}

// channel opens a channel on a live connection, re-dialling once when the
// connection turns out to have died since it was last used. It returns the
// connection too, for callers that open more channels on the same one.
func (h *connHolder) channel(ctx context.Context) (*amqp.Connection, *amqp.Channel, error) {
	for attempt := 0; ; attempt++ {
		conn, err := h.get(ctx)
		if err != nil {
			return nil, nil, err
		}
		ch, err := conn.Channel()
		if err == nil {
			return conn, ch, nil
		}
		if attempt == 0 && (errors.Is(err, amqp.ErrClosed) || conn.IsClosed()) {
			continue
		}
		return nil, nil, h.b.classify(err)
	}
}

// close closes the connection, if any, and refuses later use.
func (h *connHolder) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	conn := h.conn
	h.conn = nil
	if conn == nil || conn.IsClosed() {
		return nil
	}
	if err := conn.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
		return err
	}
	return nil
}

// channel opens a fresh channel for one operation.
func (b *Broker) channel(ctx context.Context) (*amqp.Channel, error) {
	_, ch, err := b.conns.channel(ctx)
	return ch, err
}

// closeQuietly closes a channel whose work is done; a channel the broker
// already closed is not an error worth reporting.
func closeQuietly(ch *amqp.Channel) {
	if ch != nil && !ch.IsClosed() {
		_ = ch.Close()
	}
}
