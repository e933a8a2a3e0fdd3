package amqp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// errMgmtNotFound is the management API's 404 (no such queue or exchange).
var errMgmtNotFound = errors.New("not found by the management API")

// mgmtClient reads the few management API resources the adapter needs,
// decoding only the fields it uses (newer brokers add fields freely). With
// several nodes (a cluster's RABBITMQ_MANAGEMENT_URL list) every node
// answers for the whole cluster: a request goes to the node that answered
// last and, when that node cannot be reached or answers 5xx, to the others
// in order; the first to answer is asked next time. Each node has a
// circuit breaker (mgmt_breaker.go): a node that failed is not waited on
// again for a cool-down.
type mgmtClient struct {
	nodes []mgmtNode
	brk   []nodeBreaker
	vhost string
	http  *http.Client
	// timeout bounds each request, its body included.
	timeout time.Duration
	ver     versionCache
	// cur is the node asked first (index into nodes).
	cur atomic.Int32
}

func newMgmtClient(raw, vhost string, timeout, cooldown time.Duration) (*mgmtClient, error) {
	nodes, err := parseMgmtNodes(raw)
	if err != nil {
		return nil, err
	}
	m := &mgmtClient{nodes: nodes, brk: make([]nodeBreaker, len(nodes)), vhost: vhost, http: &http.Client{Timeout: listTimeoutFactor * timeout}, timeout: timeout} // each request's own context bounds it (getFrom)
	for i := range m.brk {
		m.brk[i].now, m.brk[i].cooldown = time.Now, cooldown
	}
	return m, nil
}

// get fetches path (already escaped) from a live node into out. A 404 is
// errMgmtNotFound; a node that answers 5xx is engine.ErrBrokerUnavailable;
// one that did not answer in time or refused the connection, or is being
// left alone after that, is a *mgmtDownError (engine.ErrManagementDown and
// engine.ErrBrokerUnavailable). With several nodes, none answering is
// ErrBrokerUnavailable joining each node's error.
func (m *mgmtClient) get(ctx context.Context, path string, out any) error {
	return m.getWithin(ctx, path, out, m.timeout)
}

// listTimeoutFactor is how many times the client's timeout a request
// whose answer lists a whole vhost (every queue, every binding) may take:
// its answer grows with the broker, and a broker of thousands of queues
// that answers a queue's request at once can take seconds to list them.
// Such a slow answer is no sign of a hung API; taking it for one would
// leave the node alone for a cool-down and stop replays that need it.
const listTimeoutFactor = 4

// getList is get for a request that lists a whole vhost.
func (m *mgmtClient) getList(ctx context.Context, path string, out any) error {
	return m.getWithin(ctx, path, out, listTimeoutFactor*m.timeout)
}

// getWithin is get with each node's request bounded by timeout.
func (m *mgmtClient) getWithin(ctx context.Context, path string, out any, timeout time.Duration) error {
	first := int(m.cur.Load())
	var errs []error
	for k := range m.nodes {
		i := (first + k) % len(m.nodes)
		nb := &m.brk[i]
		if probe, err := nb.allow(m.nodes[i].base); err != nil {
			if probe {
				m.probe(i)
			}
			errs = append(errs, err)
			continue
		}
		began := time.Now()
		err := m.getFrom(ctx, m.nodes[i], path, out, timeout)
		if !errors.Is(err, engine.ErrBrokerUnavailable) {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) && time.Since(began) >= timeout/2 {
				// The caller's own deadline cut a request that had waited
				// long: as good as no answer.
				nb.failed(unavailable("management API "+m.nodes[i].base, fmt.Errorf("GET %s: no answer within %s", path, time.Since(began).Round(time.Millisecond))))
			}
			if ctx.Err() == nil {
				m.cur.Store(int32(i)) // it answered (a 404 is an answer too)
			}
			return err
		}
		if errors.As(err, new(serverError)) {
			// A 5xx is an answer, and a quick one: the next node, and the
			// next request, may ask again.
			errs = append(errs, err)
			continue
		}
		nb.failed(err)
		errs = append(errs, &mgmtDownError{node: m.nodes[i].base, fresh: true, cause: err})
		if ctx.Err() != nil {
			return errs[len(errs)-1]
		}
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return fmt.Errorf("%w: none of the %d management API nodes answered: %w", engine.ErrBrokerUnavailable, len(errs), errors.Join(errs...))
}

// getFrom is one request to one node, bounded by timeout. A
// request the timeout cut, a connection refused or a 5xx answer (a
// serverError) is engine.ErrBrokerUnavailable; one the caller's ctx ended
// is ctx's error.
func (m *mgmtClient) getFrom(ctx context.Context, n mgmtNode, path string, out any, timeout time.Duration) error {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, n.base+path, nil)
	if err != nil {
		return err
	}
	if n.auth {
		req.SetBasicAuth(n.user, n.pass)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := m.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if rctx.Err() != nil {
			err = fmt.Errorf("GET %s: no answer within %s", path, timeout)
		}
		return unavailable("management API "+n.base, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if rctx.Err() != nil {
				return unavailable("management API "+n.base, fmt.Errorf("GET %s: the answer did not arrive within %s", path, timeout))
			}
			return fmt.Errorf("management API %s: decode: %w", path, err)
		}
		return nil
	case resp.StatusCode == http.StatusNotFound:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return errMgmtNotFound
	case resp.StatusCode >= 500:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return serverError{unavailable("management API "+n.base, fmt.Errorf("GET %s: %s", path, resp.Status))}
	default:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("management API GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(msg)))
	}
}

// serverError is a node's 5xx answer.
type serverError struct{ error }

func (e serverError) Unwrap() error { return e.error }

// queueJSON is the part of GET /api/queues/{vhost}/{name} the adapter reads.
type queueJSON struct {
	Name            string          `json:"name"`
	Type            string          `json:"type"`
	Arguments       map[string]any  `json:"arguments"`
	EffectivePolicy json.RawMessage `json:"effective_policy_definition"`
	// Policy and OperatorPolicy name the policies applied (null: none).
	Policy         string `json:"policy"`
	OperatorPolicy string `json:"operator_policy"`
	// Limit is the quorum queue's effective delivery limit as RabbitMQ 4.0+
	// reports it once its statistics are in: a number or "unlimited".
	Limit json.RawMessage `json:"delivery_limit"`
	// version is the broker's version ("" when unknown), set by queue.
	version string

	MessagesReady   *int64 `json:"messages_ready"`
	MessagesUnacked int64  `json:"messages_unacknowledged"`
	Consumers       int64  `json:"consumers"`
	// MessageStats is absent (nil) from an idle queue's answer, and at
	// times from a busy one's (seen on RabbitMQ 4.3 after the channels
	// that counted closed).
	MessageStats    *messageStatsJSON `json:"message_stats"`
	MessagesDetails struct {
		Samples []struct {
			Timestamp int64 `json:"timestamp"`
		} `json:"samples"`
	} `json:"messages_details"`
	// ConsumerDetails lists the queue's consumers: whether each acks what
	// it takes (ack_required false: it consumes with auto-ack).
	ConsumerDetails []struct {
		AckRequired *bool `json:"ack_required"`
	} `json:"consumer_details"`
}

// messageStatsJSON is the message_stats object of a queue's answer.
type messageStatsJSON struct {
	Publish    int64 `json:"publish"`
	DeliverGet int64 `json:"deliver_get"`
	Ack        int64 `json:"ack"`
	Redeliver  int64 `json:"redeliver"`
}

// queueType is the queue's type: the "type" field, else the x-queue-type
// argument, else "classic" for brokers that predate both.
func (q *queueJSON) queueType() string {
	if q.Type != "" {
		return q.Type
	}
	if t, ok := q.Arguments["x-queue-type"].(string); ok && t != "" {
		return t
	}
	return "classic"
}

// deliveryLimit is the effective delivery limit on the broker that
// answered (see limit); 0 when none applies.
func (q *queueJSON) deliveryLimit() int {
	l := q.limit(q.version)
	if !l.has {
		return 0
	}
	return l.limit
}

// policyLimit is the delivery-limit of the effective policy definition
// (policy and operator policy merged by the broker).
func (q *queueJSON) policyLimit() (int, bool) {
	var policy map[string]any
	// An empty definition is [] on older brokers: ignore what is not an object.
	if len(q.EffectivePolicy) > 0 && json.Unmarshal(q.EffectivePolicy, &policy) == nil {
		return intValue(policy["delivery-limit"])
	}
	return 0, false
}

// intValue reads a JSON number (or numeric string) as an int of any sign.
func intValue(v any) (int, bool) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case string:
		n, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return 0, false
		}
		f = n
	default:
		return 0, false
	}
	if f < math.MinInt32 || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

// queue reads one queue; with samples it asks for the length history too,
// which dates the statistics sample.
func (m *mgmtClient) queue(ctx context.Context, name string, samples bool) (*queueJSON, error) {
	path := "/api/queues/" + url.PathEscape(m.vhost) + "/" + url.PathEscape(name)
	if samples {
		path += "?lengths_age=5&lengths_incr=5"
	}
	var q queueJSON
	if err := m.get(ctx, path, &q); err != nil {
		return nil, err
	}
	q.version = m.brokerVersion(ctx)
	return &q, nil
}

// overview reads the broker's version from GET /api/overview.
func (m *mgmtClient) overview(ctx context.Context) (string, error) {
	var o struct {
		Version string `json:"rabbitmq_version"`
	}
	if err := m.get(ctx, "/api/overview", &o); err != nil {
		return "", err
	}
	return o.Version, nil
}

// policyJSON is GET /api/policies/{vhost}/{name}.
type policyJSON struct {
	Name       string         `json:"name"`
	Pattern    string         `json:"pattern"`
	ApplyTo    string         `json:"apply-to"`
	Priority   int            `json:"priority"`
	Definition map[string]any `json:"definition"`
}

func (m *mgmtClient) policy(ctx context.Context, name string) (*policyJSON, error) {
	var p policyJSON
	if err := m.get(ctx, "/api/policies/"+url.PathEscape(m.vhost)+"/"+url.PathEscape(name), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// exchangeJSON is the part of GET /api/exchanges/{vhost}/{name} the adapter reads.
type exchangeJSON struct {
	Name      string         `json:"name"`
	Type      string         `json:"type"`
	Arguments map[string]any `json:"arguments"`
}

func (m *mgmtClient) exchange(ctx context.Context, name string) (*exchangeJSON, error) {
	var x exchangeJSON
	if err := m.get(ctx, "/api/exchanges/"+url.PathEscape(m.vhost)+"/"+url.PathEscape(name), &x); err != nil {
		return nil, err
	}
	return &x, nil
}

// bindingJSON is one entry of GET /api/exchanges/{vhost}/{name}/bindings/source.
type bindingJSON struct {
	Destination     string `json:"destination"`
	DestinationType string `json:"destination_type"` // "queue" or "exchange"
	RoutingKey      string `json:"routing_key"`
}

func (m *mgmtClient) bindings(ctx context.Context, exchange string) ([]bindingJSON, error) {
	var bs []bindingJSON
	path := "/api/exchanges/" + url.PathEscape(m.vhost) + "/" + url.PathEscape(exchange) + "/bindings/source"
	if err := m.get(ctx, path, &bs); err != nil {
		return nil, err
	}
	return bs, nil
}

// QueueStats is the management API's view of a queue. The counters are
// refreshed every statistics interval (5 s by default), so they lag the
// queue by that much; they are per-queue totals shared by all clients.
type QueueStats struct {
	Name string
	// Type is "classic", "quorum" or "stream".
	Type string
	// DeliveryLimit is the effective delivery limit (argument or policy,
	// the smaller); 0 when none.
	DeliveryLimit int
	// Sampled is false when the broker has not emitted statistics for the
	// queue yet (a queue declared moments ago): the counts below are then 0
	// and mean nothing.
	Sampled   bool
	Ready     int64
	Unacked   int64
	Consumers int
	// HasStats reports whether the answer carried the message_stats
	// counters below. Without them they are 0, which may mean the queue
	// has been idle since the broker started keeping them or that the
	// API left them out.
	HasStats bool
	// Publish, DeliverGet, Ack and Redeliver are the cumulative
	// message_stats counters; 0 while the queue has been idle since the
	// broker started keeping them.
	Publish    int64
	DeliverGet int64
	Ack        int64
	Redeliver  int64
	// SampledAt is the time of the newest length sample the API returned,
	// on the statistics interval's boundary (zero when unknown). The
	// boundary can lie ahead of when the counts were taken (see sampleAge):
	// they are at least as new as SampledAt less sampleAge.
	SampledAt time.Time
	// Fetched is when this client received the answer.
	Fetched time.Time
	// Listed is how many consumers the answer listed (consumer_details),
	// and NoAck how many of them take messages without acknowledgements
	// (auto-ack). The list is the broker's current one less the consumers
	// that subscribed since its last statistics sample: a consumer that
	// goes leaves it at once, a new one joins it at the next sample.
	Listed, NoAck int
}

// QueueStats reads a queue's statistics from the management API. A missing
// queue is engine.ErrQueueNotFound; an unreachable API is
// engine.ErrBrokerUnavailable.
func (b *Broker) QueueStats(ctx context.Context, queue string) (QueueStats, error) {
	q, err := b.mgmt.queue(ctx, queue, true)
	if errors.Is(err, errMgmtNotFound) {
		err = engine.ErrQueueNotFound
	}
	if err != nil {
		return QueueStats{}, fmt.Errorf("amqp: queue stats %s: %w", queue, err)
	}
	s := QueueStats{
		Name:          queue,
		Type:          q.queueType(),
		DeliveryLimit: q.deliveryLimit(),
		Sampled:       q.MessagesReady != nil,
		Unacked:       q.MessagesUnacked,
		Consumers:     int(q.Consumers),
		Fetched:       time.Now(),
	}
	for _, cd := range q.ConsumerDetails {
		s.Listed++
		if cd.AckRequired != nil && !*cd.AckRequired {
			s.NoAck++
		}
	}
	if ms := q.MessageStats; ms != nil {
		s.HasStats = true
		s.Publish, s.DeliverGet, s.Ack, s.Redeliver = ms.Publish, ms.DeliverGet, ms.Ack, ms.Redeliver
	}
	if q.MessagesReady != nil {
		s.Ready = *q.MessagesReady
	}
	for _, smp := range q.MessagesDetails.Samples {
		if t := time.UnixMilli(smp.Timestamp); smp.Timestamp > 0 && t.After(s.SampledAt) {
			s.SampledAt = t
		}
	}
	return s, nil
}
