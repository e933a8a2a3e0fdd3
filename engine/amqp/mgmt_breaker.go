package amqp

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// The management API is a hint, never a wait: every request has a short
// deadline (Config.HTTPTimeout), and a node that did not answer in time
// or refused the connection is left alone for
// Config.ManagementCooldown. Meanwhile every request to it fails at once
// with a *mgmtDownError (engine.ErrManagementDown and
// engine.ErrBrokerUnavailable), so a caller waits on a hanging API at most
// once a cool-down, not once a call. When the cool-down is over, the next
// request starts one probe in the background (GET /api/overview, with the
// same deadline) and still fails at once; the node is asked again when the
// probe is answered, and left alone for another cool-down when it is not.
// No caller ever waits on a probe. A 5xx answer is an answer, and a quick
// one: it opens no breaker.

// nodeBreaker is the state of one management node's circuit breaker.
type nodeBreaker struct {
	mu sync.Mutex
	// now tells the time (time.Now; a test's clock).
	now      func() time.Time
	cooldown time.Duration
	// downSince is when the node last failed while closed (zero: the
	// breaker is closed); until is when the cool-down ends; cause is the
	// last failure.
	downSince, until time.Time
	cause            error
	// probing is set while a probe is under way.
	probing bool
}

// allow reports whether a request may go to the node. When the breaker is
// open it returns the error to fail with, and probe is true when the
// caller must start the probe (the cool-down is over and none runs).
func (nb *nodeBreaker) allow(base string) (probe bool, err error) {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	if nb.downSince.IsZero() {
		return false, nil
	}
	if !nb.probing && !nb.now().Before(nb.until) {
		nb.probing = true
		probe = true
	}
	return probe, &mgmtDownError{node: base, since: nb.downSince, until: nb.until, probing: nb.probing, cause: nb.cause}
}

// failed opens the breaker (or keeps it open) for a cool-down from now,
// and ends a probe.
func (nb *nodeBreaker) failed(cause error) {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	now := nb.now()
	if nb.downSince.IsZero() {
		nb.downSince = now
	}
	nb.until, nb.cause, nb.probing = now.Add(nb.cooldown), cause, false
}

// answered closes the breaker.
func (nb *nodeBreaker) answered() {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	nb.downSince, nb.until, nb.cause, nb.probing = time.Time{}, time.Time{}, nil, false
}

// down reports whether the breaker is open.
func (nb *nodeBreaker) down() bool {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	return !nb.downSince.IsZero()
}

// mgmtDownError is a request a node's open breaker refused, or the
// failure that opened it (fresh).
type mgmtDownError struct {
	node         string
	since, until time.Time
	probing      bool
	fresh        bool
	cause        error
}

func (e *mgmtDownError) Error() string {
	node := e.node
	if e.fresh {
		return fmt.Sprintf("%s: %s: %v (not asked again for a while)", engine.ErrManagementDown, node, e.cause)
	}
	next := "a probe is under way"
	if !e.probing {
		next = "next probe at " + e.until.UTC().Format(time.TimeOnly)
	}
	return fmt.Sprintf("%s: %s has not answered since %s (%v); %s", engine.ErrManagementDown, node,
		e.since.UTC().Format(time.TimeOnly), e.cause, next)
}

// Unwrap makes the error engine.ErrManagementDown and, through its cause,
// engine.ErrBrokerUnavailable.
func (e *mgmtDownError) Unwrap() []error { return []error{engine.ErrManagementDown, e.cause} }

// probe asks node i whether it answers again, in the background: its
// breaker closes when it does and stays open for another cool-down when
// it does not.
func (m *mgmtClient) probe(i int) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
		defer cancel()
		var o struct {
			Version string `json:"rabbitmq_version"`
		}
		if err := m.getFrom(ctx, m.nodes[i], "/api/overview", &o, m.timeout); err != nil {
			m.brk[i].failed(err)
			return
		}
		m.brk[i].answered()
	}()
}
