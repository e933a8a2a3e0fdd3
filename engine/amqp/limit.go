package amqp

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The effective delivery limit of a quorum queue and whether give-backs
// count against it, as rabbit_quorum_queue and rabbit_fifo work them out.

// defaultQuorumLimit is RabbitMQ 4.0+'s delivery limit for a quorum queue
// that sets none.
const defaultQuorumLimit = 20

// versionTTL is how long the broker's version is cached.
const versionTTL = time.Minute

// limitInfo is a queue's effective delivery limit.
type limitInfo struct {
	has   bool   // a limit applies
	limit int    // the limit (count > limit drops a message)
	from  string // "argument", "policy" (or operator policy) or "default"
}

// version is a parsed "major.minor".
type version struct{ major, minor int }

func parseVersion(s string) (version, bool) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return version{}, false
	}
	maj, err1 := strconv.Atoi(parts[0])
	min, err2 := strconv.Atoi(strings.TrimLeft(parts[1], "v"))
	if err1 != nil || err2 != nil {
		return version{}, false
	}
	return version{maj, min}, true
}

// limit works out q's effective delivery limit on a broker of version v
// ("" when unknown, taken to be 4.0+, whose default is the stricter
// assumption). It follows rabbit_quorum_queue: argument and policy, the
// smaller wins (on 4.0+ a negative one means unlimited and loses to a
// non-negative one); neither set is no limit before 4.0 and 20 from 4.0 on.
func (q *queueJSON) limit(v string) limitInfo {
	if q.queueType() != "quorum" {
		return limitInfo{}
	}
	ver, known := parseVersion(v)
	v4 := !known || ver.major >= 4
	arg, hasArg := intValue(q.Arguments["x-delivery-limit"])
	pol, hasPol := q.policyLimit()
	var l limitInfo
	switch {
	case !hasArg && !hasPol:
		if v4 {
			l = limitInfo{has: true, limit: defaultQuorumLimit, from: "default"}
		}
	case hasArg && !hasPol:
		l = limitInfo{has: true, limit: arg, from: "argument"}
	case hasPol && !hasArg:
		l = limitInfo{has: true, limit: pol, from: "policy"}
	case v4 && (arg < 0 || pol < 0):
		l = limitInfo{has: true, limit: max(arg, pol), from: "argument"}
		if pol > arg {
			l.from = "policy"
		}
	default:
		l = limitInfo{has: true, limit: min(arg, pol), from: "argument"}
		if pol < arg {
			l.from = "policy"
		}
	}
	if l.has && l.limit < 0 {
		if v4 {
			return limitInfo{} // unlimited
		}
		l.limit = 0 // before 4.0 a negative limit drops at the first give-back
	}
	// 4.0+ reports the limit its queue applies, once its statistics are
	// in; a policy just changed may not show there yet. Either may be the
	// newer, so the smaller counts.
	var n int
	if len(q.Limit) > 0 && json.Unmarshal(q.Limit, &n) == nil {
		switch {
		case !l.has:
			l = limitInfo{has: true, limit: n, from: "default"}
		case n < l.limit:
			l.limit = n
		}
	}
	return l
}

// older reports whether v is an earlier release line than w.
func (v version) older(w version) bool {
	return v.major < w.major || v.major == w.major && v.minor < w.minor
}

// requeueCounts reports whether a give-back (basic.nack with requeue)
// counts against a quorum queue's delivery limit on broker version v:
// 3.x counts every return in delivery_count, 4.0–4.2 in acquired_count
// (both shown as x-delivery-count); from 4.3 the limit applies to
// delivery_count alone, which only failures raise (basic.reject, a channel
// or connection lost with the message unacked). A version that cannot be
// read counts as before 4.3, the stricter rule; the read budget refuses
// such a quorum queue before asking (see readCounts).
func requeueCounts(v string) bool {
	ver, ok := parseVersion(v)
	return !ok || ver.older(version{4, 3})
}

// brokerVersion is RabbitMQ's version from the management API, cached;
// "" when it cannot be read.
func (m *mgmtClient) brokerVersion(ctx context.Context) string {
	m.ver.mu.Lock()
	defer m.ver.mu.Unlock()
	if m.ver.v != "" && time.Since(m.ver.at) < versionTTL {
		return m.ver.v
	}
	if v, err := m.overview(ctx); err == nil && v != "" {
		m.ver.v, m.ver.at = v, time.Now()
	}
	return m.ver.v
}

// versionCache holds the broker's version.
type versionCache struct {
	mu sync.Mutex
	v  string
	at time.Time
}
