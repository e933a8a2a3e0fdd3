package amqp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
)

// The read budget (see engine/budget.go): every read of a quorum queue
// gives back what it does not move with Nack(requeue), which RabbitMQ
// before 4.3 counts against the queue's delivery limit (4.3 counts only
// failed deliveries: basic.reject, a lost channel). A read starts only
// when no message can reach its limit by it, stops at a delivery whose
// count says otherwise, and leaves a mark (the highest count it saw, plus
// the give-back) for the next read, on any replica. The rules are the
// broker's version's (requeueCounts), read from the broker, never assumed;
// a quorum queue whose budget cannot be told is not read.

// marks keeps read marks in memory and, when set, in a shared store.
type marks struct {
	shared engine.ReadMarks
	mu     sync.Mutex
	local  map[string]engine.ReadMark
}

// last is what the last reads of queue left: the shared store's mark when
// there is one (every replica writes it; a whole read there may have
// lowered it), else this process's own.
func (m *marks) last(ctx context.Context, vhost, queue string) (engine.ReadMark, error) {
	if m.shared != nil {
		s, _, err := m.shared.LastRead(ctx, vhost, queue)
		return s, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.local[queue], nil
}

// record stores a read's mark in memory and in the shared store.
func (m *marks) record(vhost, queue string, mk engine.ReadMark, whole bool) error {
	m.mu.Lock()
	if m.local == nil {
		m.local = map[string]engine.ReadMark{}
	}
	if old := m.local[queue]; whole || mk.Count > old.Count {
		mk.Reads += old.Reads
		m.local[queue] = mk
	}
	m.mu.Unlock()
	if m.shared == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return m.shared.RecordRead(ctx, vhost, queue, mk, whole)
}

// readCounts fills the budget part of a queue's state: limit, where it
// comes from, the policy to raise it in and the mark of the last read. A
// quorum queue on a broker whose version cannot be told is a
// *engine.BudgetUnknownError: each version counts differently.
func (b *Broker) readCounts(ctx context.Context, q *queueJSON) (int, engine.ReadCounts, error) {
	var rc engine.ReadCounts
	if q.queueType() != "quorum" {
		return 0, rc, nil
	}
	ver := b.budgetVersion(ctx, q.version)
	if _, ok := parseVersion(ver); !ok {
		reason := "RabbitMQ's version is unknown (neither the management API nor the AMQP connection tells it)"
		if ver != "" {
			reason = fmt.Sprintf("RabbitMQ's version %q is not one dlqbot can read", ver)
		}
		return 0, rc, &engine.BudgetUnknownError{Queue: q.Name, Reason: reason}
	}
	l := q.limit(ver)
	if !l.has {
		return 0, rc, nil
	}
	rc.BrokerVersion = ver
	rc.RequeueCounts = requeueCounts(ver)
	rc.LimitFrom = l.from
	rc.OperatorPolicy = q.OperatorPolicy
	if q.Policy != "" {
		if p, err := b.policyInfo(ctx, q.Policy); err == nil {
			rc.Policy = &engine.Policy{Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo, Priority: p.Priority, Definition: p.Definition}
			if pl, ok := intValue(p.Definition["delivery-limit"]); l.from == "policy" && (!ok || pl != l.limit) {
				rc.LimitFrom = "operator policy"
			}
		}
	} else if l.from == "policy" && q.OperatorPolicy != "" {
		rc.LimitFrom = "operator policy"
	}
	mk, err := b.marks.last(ctx, b.vhost, q.Name)
	if err != nil {
		return l.limit, rc, err
	}
	rc.DeliveryCount = mk.Count
	return l.limit, rc, nil
}

// budgetVersion is the version whose rules the read budget follows (see
// pickVersion): the management API's (mgmtVer) or the AMQP server's own,
// announced when the connection opened.
func (b *Broker) budgetVersion(ctx context.Context, mgmtVer string) string {
	var amqpVer string
	if conn, err := b.conns.get(ctx); err == nil {
		amqpVer, _ = conn.Properties["version"].(string)
	}
	return pickVersion(mgmtVer, amqpVer)
}

// pickVersion chooses between the management API's version and the AMQP
// server's: the one that can be read; when both can and differ (a cluster
// being upgraded node by node) the older, whose rules are the stricter;
// when neither can, what there is ("" or an odd string).
func pickVersion(mgmtVer, amqpVer string) string {
	mv, mok := parseVersion(mgmtVer)
	av, aok := parseVersion(amqpVer)
	switch {
	case mok && aok && av.older(mv):
		return amqpVer
	case mok:
		return mgmtVer
	case aok:
		return amqpVer
	case mgmtVer != "":
		return mgmtVer
	}
	return amqpVer
}

// readBudget is one read's budget.
type readBudget struct {
	b      *Broker
	queue  string
	quorum bool
	state  engine.QueueInfo // limit and counts when the read began
	seen   int              // highest delivery count seen; -1 none
}

// startRead checks, before a read of queue, that it can bring no message to
// its delivery limit. It fails closed: when the management API cannot say
// what the queue is (unreachable, or it does not know a queue that
// exists), the read is refused with a *engine.BudgetUnknownError, unless
// an earlier answer said the queue is classic (its type changes only when
// it is deleted and declared again), for which no budget applies.
func (b *Broker) startRead(ctx context.Context, queue string) (*readBudget, error) {
	rb := &readBudget{b: b, queue: queue, seen: -1}
	q, err := b.queueInfo(ctx, queue)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if b.info.knownClassic(queue) {
			return rb, nil
		}
		// Only a queue that exists needs a budget; a missing queue or an
		// unreachable broker is the read's own error to report.
		if _, found, perr := b.declarePassive(ctx, queue); perr != nil || !found {
			return rb, nil
		}
		reason := "management API unreachable"
		switch {
		case errors.Is(err, errMgmtNotFound):
			reason = "the management API does not know the queue"
		case !errors.Is(err, engine.ErrBrokerUnavailable):
			reason = "the management API did not answer: " + err.Error()
		}
		return nil, &engine.BudgetUnknownError{Queue: queue, Reason: reason, Err: err}
	}
	rb.quorum = q.queueType() == "quorum"
	rb.state.Name = queue
	limit, rc, err := b.readCounts(ctx, q)
	if err != nil {
		return nil, err
	}
	rb.state.DeliveryLimit, rb.state.ReadCounts = limit, rc
	if left := rb.state.ReadsLeft(); left == 0 {
		return nil, &engine.ReadBudgetError{Queue: queue, Limit: limit, LimitFrom: rc.LimitFrom,
			Count: rc.DeliveryCount, Need: 1, Left: 0, Version: rc.BrokerVersion, Raise: rb.raise()}
	}
	return rb, nil
}

// raise says how to raise the queue's limit.
func (rb *readBudget) raise() string {
	return engine.RaiseLimit(rb.b.vhost, rb.state, engine.SuggestedLimit(rb.state, 1))
}

// see checks one delivery: a message whose give-back would bring it to its
// limit stops the read.
func (rb *readBudget) see(d amqp.Delivery) error {
	if rb == nil || !rb.quorum {
		return nil
	}
	n := deliveryCount(d.Headers)
	rb.seen = max(rb.seen, n)
	st := rb.state
	if st.RequeueCounts && n+1 >= st.DeliveryLimit {
		return &engine.ReadBudgetError{Queue: rb.queue, Limit: st.DeliveryLimit, LimitFrom: st.LimitFrom,
			Count: n, Midway: true, Version: st.BrokerVersion, Raise: rb.raise()}
	}
	// 4.3 counts no give-back, but a delivery lost with its connection (a
	// node dying under the read) is a failure, in x-delivery-count, and a
	// message past its limit is dropped: the read stops at a message one
	// such loss would take past it (the reserve of one kept before 4.3,
	// where the give-back itself also counts).
	if f := headerInt(d.Headers["x-delivery-count"]); !st.RequeueCounts && st.DeliveryLimit > 0 && f >= st.DeliveryLimit {
		st.DeliveryCount = f
		return &engine.ReadBudgetError{Queue: rb.queue, Limit: st.DeliveryLimit, LimitFrom: st.LimitFrom,
			Count: f, Midway: true, Failures: true, Version: st.BrokerVersion,
			Raise: engine.RaiseLimit(rb.b.vhost, st, engine.SuggestedLimit(st, 1))}
	}
	return nil
}

// done records what the read left: every message it gave back was
// delivered with at most seen and now has one more. A whole read (it saw
// every message ready at its start) replaces the mark.
func (rb *readBudget) done(whole bool) error {
	if rb == nil || !rb.quorum {
		return nil
	}
	mk := engine.ReadMark{Count: rb.seen + 1, At: time.Now(), Reads: 1}
	if rb.seen < 0 {
		if !whole {
			return nil // nothing read, nothing given back
		}
		mk.Count = 0
	}
	return rb.b.marks.record(rb.b.vhost, rb.queue, mk, whole)
}

// deliveryCount is the count RabbitMQ before 4.3 compares with the limit,
// as shown on delivery: x-delivery-count (3.x: delivery_count; 4.0–4.2:
// acquired_count), or x-acquired-count where a broker sends it; 0 when
// absent.
func deliveryCount(h amqp.Table) int {
	return max(headerInt(h["x-delivery-count"]), headerInt(h["x-acquired-count"]))
}

func headerInt(v any) int {
	switch x := v.(type) {
	case int64:
		return int(x)
	case int32:
		return int(x)
	case int16:
		return int(x)
	case int8:
		return int(x)
	case int:
		return x
	case uint8:
		return int(x)
	case uint16:
		return int(x)
	case uint32:
		return int(x)
	case uint64:
		return int(x)
	case float64:
		return int(x)
	case string:
		n, _ := strconv.Atoi(x)
		return n
	}
	return 0
}
