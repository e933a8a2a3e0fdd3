package amqp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
)

// Defaults used for the zero fields of Config.
const (
	DefaultURL           = "amqp://guest:guest@127.0.0.1:5672/"
	DefaultManagementURL = "http://guest:guest@127.0.0.1:15672"
	DefaultPrefetch      = 10000
	// DefaultCursorPrefetch is the default of Config.CursorPrefetch.
	DefaultCursorPrefetch = 1000
	DefaultIdleTimeout    = 500 * time.Millisecond
	DefaultStallTimeout   = 2 * time.Minute
	DefaultQuietWait      = 3 * time.Second
	DefaultHTTPTimeout    = 5 * time.Second
	// DefaultManagementCooldown is how long a management node that did
	// not answer is left alone (Config.ManagementCooldown).
	DefaultManagementCooldown = 30 * time.Second
	DefaultDialTimeout        = 5 * time.Second
	DefaultSettleTimeout      = 30 * time.Second
	// MaxPrefetch is the largest prefetch basic.qos can express (16 bits).
	MaxPrefetch = 65535
)

// Config configures a Broker. Every zero field takes the documented default.
type Config struct {
	// URL is the AMQP URL; the vhost is its path ("/" when empty). A
	// cluster's nodes may be listed, separated by commas
	// ("amqp://u:p@n1:5672/,amqp://u:p@n2:5672/"), all with the same vhost:
	// the Broker connects to the first that answers and, after losing its
	// node, to the next (see connHolder). Default DefaultURL.
	URL string
	// ManagementURL is the base URL of the management HTTP API, with the
	// credentials as user info; a cluster's nodes may be listed, separated
	// by commas, and any live one is asked (see mgmtClient). Default
	// DefaultManagementURL.
	ManagementURL string
	// Prefetch is the page size of a read: how many messages one channel's
	// consumer holds (basic.qos prefetch_count). A queue with more messages
	// is read through several channels, one window each. Default
	// DefaultPrefetch; at most MaxPrefetch. Larger windows mean fewer
	// channels but more deliveries buffered in memory when the caller is
	// slower than the broker.
	Prefetch int
	// CursorPrefetch is the page size of a read that acks what it holds
	// out of order — a replay's cursor, or a read kept for one — on a
	// classic queue: the queue finds each ack by walking the unacked
	// messages its channel holds from the oldest (RabbitMQ's
	// rabbit_queue_consumers, 3.10 to 4.3), so a filtered replay's acks,
	// each behind the unselected messages its channel holds, cost the
	// broker time in proportion to the window. Widened when the read would
	// need more than 100 windows (a give-back costs the broker in
	// proportion to their number: see forAcks), up to Prefetch, and like
	// Prefetch when the queue would need more than half the connection's
	// channels. Default DefaultCursorPrefetch; at most MaxPrefetch.
	CursorPrefetch int
	// IdleTimeout is how long a read waits for the next delivery before it
	// asks the broker whether any message is still ready for it. A read
	// never ends on a pause alone: it ends when it has read every message
	// ready at its start, or when the broker reports none left for it
	// (another consumer holds or took them; the read is then short).
	// Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// StallTimeout ends a read that has had no delivery for this long
	// although the broker reports messages ready, or none ready with no
	// other consumer on the queue (a single-active-consumer queue served to
	// another client, say); the read is then short. It also bounds the wait
	// for earlier requeues while the management API still counts them in
	// the queue (see SettleTimeout). Default DefaultStallTimeout.
	StallTimeout time.Duration
	// QuietWait is how long a read waits, before it starts, for other
	// consumers of the queue to let go (another reader, or a quorum
	// queue's requeues from another process not yet applied); while the
	// ready count rises it waits up to SettleTimeout. Default
	// DefaultQuietWait.
	QuietWait time.Duration
	// HTTPTimeout bounds each management API request, its answer
	// included. The API is a hint the adapter never waits on for long: a
	// node that does not answer within HTTPTimeout (or refuses the
	// connection) is left alone for ManagementCooldown, and requests to
	// it fail at once with engine.ErrManagementDown (see
	// mgmt_breaker.go). Default DefaultHTTPTimeout (5 s: a queue's answer
	// takes milliseconds, and under heavy load still well under a second).
	// A request that lists the whole vhost (every queue, binding or
	// connection) may take four times as long (listTimeoutFactor).
	HTTPTimeout time.Duration
	// ManagementCooldown is how long a management node that did not
	// answer is left alone before one probe in the background asks it
	// again. Default DefaultManagementCooldown.
	ManagementCooldown time.Duration
	// DialTimeout bounds the TCP connect and AMQP handshake. Default
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// SettleTimeout is how long a read (Scan, Move) waits before it starts
	// for messages this Broker gave back (requeued) to the same queue
	// earlier to show in the queue's ready count, on the count alone: both
	// queue types apply requeues asynchronously. Past it, the read waits on
	// only while the management API still counts those messages in the
	// queue, up to StallTimeout. Default DefaultSettleTimeout.
	SettleTimeout time.Duration
	// ConnectionName is shown in the management UI. Default "dlqbot".
	ConnectionName string
	// ReadMarks, when set, is where reads remember their marks (Redis,
	// shared by every replica; see budget.go). Default: this process's
	// memory alone.
	ReadMarks engine.ReadMarks
}

func (c Config) withDefaults() Config {
	if c.URL == "" {
		c.URL = DefaultURL
	}
	if c.ManagementURL == "" {
		c.ManagementURL = DefaultManagementURL
	}
	if c.Prefetch <= 0 {
		c.Prefetch = DefaultPrefetch
	}
	if c.CursorPrefetch <= 0 {
		c.CursorPrefetch = DefaultCursorPrefetch
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.QuietWait <= 0 {
		c.QuietWait = DefaultQuietWait
	}
	if c.HTTPTimeout <= 0 {
		c.HTTPTimeout = DefaultHTTPTimeout
	}
	if c.ManagementCooldown <= 0 {
		c.ManagementCooldown = DefaultManagementCooldown
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.SettleTimeout <= 0 {
		c.SettleTimeout = DefaultSettleTimeout
	}
	if c.ConnectionName == "" {
		c.ConnectionName = "dlqbot"
	}
	return c
}

// Broker is the RabbitMQ adapter. It is safe for concurrent use: each
// operation works on its own channels over one shared connection.
type Broker struct {
	cfg      Config
	uri      amqp.URI   // the first node's (credentials, vhost)
	nodes    []amqpNode // the AMQP URL list, in order
	vhost    string
	mgmt     *mgmtClient
	conns    connHolder
	pending  pendingRequeues
	marks    marks        // what the last reads left (read budget)
	info     infoCache    // recent management answers (read budget)
	counters counterMarks // the highest counters seen by queue (Counters)
	// delivered counts the reads' deliveries by queue (Delivered).
	delivered deliveryCounts
	// kept are approvals' reads kept for their runs (keep.go).
	kept keptReads
}

var _ engine.Broker = (*Broker)(nil)

// ErrBrokerClosed is returned by operations on a Broker after Close.
var ErrBrokerClosed = errors.New("amqp: broker closed")

// New checks cfg and returns a Broker. It does not dial: the AMQP connection
// is opened by the first operation that needs it.
func New(cfg Config) (*Broker, error) {
	cfg = cfg.withDefaults()
	if cfg.Prefetch > MaxPrefetch {
		return nil, fmt.Errorf("amqp: prefetch %d exceeds %d", cfg.Prefetch, MaxPrefetch)
	}
	if cfg.CursorPrefetch > MaxPrefetch {
		return nil, fmt.Errorf("amqp: cursor prefetch %d exceeds %d", cfg.CursorPrefetch, MaxPrefetch)
	}
	nodes, err := parseAMQPNodes(cfg.URL)
	if err != nil {
		return nil, err
	}
	uri := nodes[0].uri
	mgmt, err := newMgmtClient(cfg.ManagementURL, uri.Vhost, cfg.HTTPTimeout, cfg.ManagementCooldown)
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, uri: uri, nodes: nodes, vhost: uri.Vhost, mgmt: mgmt, marks: marks{shared: cfg.ReadMarks}}
	b.conns.b = b
	return b, nil
}

// Vhost is the virtual host the broker works in (from the AMQP URL).
func (b *Broker) Vhost() string { return b.vhost }

// Close gives back the reads kept for runs (keep.go) and closes the AMQP
// connection; later operations fail with ErrBrokerClosed.
func (b *Broker) Close() error {
	b.dropAllKept()
	return b.conns.close()
}

// unavailable wraps a transport failure as engine.ErrBrokerUnavailable,
// naming the endpoint without its password.
func unavailable(endpoint string, err error) error {
	return fmt.Errorf("%w: %s: %v", engine.ErrBrokerUnavailable, endpoint, err)
}

// isNotFound reports whether err is the broker's 404 NOT_FOUND.
func isNotFound(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.NotFound
}

// classify turns a channel-level error into the engine's vocabulary: a lost
// connection is ErrBrokerUnavailable, a 404 is ErrQueueNotFound.
func (b *Broker) classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, engine.ErrBrokerUnavailable) || errors.Is(err, ErrBrokerClosed) {
		return err
	}
	if isNotFound(err) {
		return fmt.Errorf("%w (%v)", engine.ErrQueueNotFound, err)
	}
	var ae *amqp.Error
	if errors.Is(err, amqp.ErrClosed) || (errors.As(err, &ae) && isConnectionCode(ae.Code)) || isNetworkError(err) {
		return b.lost(err)
	}
	return err
}

// isNetworkError reports a write or read on a connection whose peer went
// away ("write: connection reset by peer" from a publish to a node just
// killed), which the library returns as is rather than as ErrClosed.
func isNetworkError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// lost is a connection that was open and is gone (its node died or closed
// it): an engine.NodeLostError naming the node, which a paced replay
// outlives (engine/reconnect.go).
func (b *Broker) lost(err error) error {
	return &engine.NodeLostError{Node: b.conns.node(), Err: err}
}

// isConnectionCode reports AMQP reply codes that end the connection rather
// than one channel.
func isConnectionCode(code int) bool {
	switch code {
	case amqp.ConnectionForced, amqp.FrameError, amqp.SyntaxError, amqp.CommandInvalid,
		amqp.ChannelError, amqp.UnexpectedFrame, amqp.ResourceError, amqp.NotAllowed,
		amqp.NotImplemented, amqp.InternalError:
		return true
	}
	return false
}
