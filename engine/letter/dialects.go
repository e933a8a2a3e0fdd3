package letter

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Header names read by the dialect parsers (docs/design.md "Dead-letter dialects").
const (
	hXDeath             = "x-death"
	hFirstDeathQueue    = "x-first-death-queue"
	hFirstDeathReason   = "x-first-death-reason"
	hFirstDeathExchange = "x-first-death-exchange"
	hLastDeathQueue     = "x-last-death-queue"
	hLastDeathReason    = "x-last-death-reason"
	hLastDeathExchange  = "x-last-death-exchange"

	hSpringMessage    = "x-exception-message"
	hSpringStack      = "x-exception-stacktrace"
	hSpringType       = "x-exception-type"
	hSpringExchange   = "x-original-exchange"
	hSpringRoutingKey = "x-original-routingKey"

	hMTReason       = "MT-Reason"
	hMTFaultPrefix  = "MT-Fault-"
	hMTExcType      = "MT-Fault-ExceptionType"
	hMTMessage      = "MT-Fault-Message"
	hMTTimestamp    = "MT-Fault-Timestamp"
	hMTInputAddress = "MT-Fault-InputAddress"
	hMTRetryCount   = "MT-Fault-RetryCount"

	hNSBFailedQ       = "NServiceBus.FailedQ"
	hNSBTimeOfFailure = "NServiceBus.TimeOfFailure"
	hNSBExcPrefix     = "NServiceBus.ExceptionInfo."
	hNSBExcType       = "NServiceBus.ExceptionInfo.ExceptionType"
	hNSBExcMessage    = "NServiceBus.ExceptionInfo.Message"
	hNSBRetries       = "NServiceBus.Retries"   // delayed retries performed
	hNSBFLRetries     = "NServiceBus.FLRetries" // immediate retries performed (older versions)
)

// deathEntry is one readable x-death entry.
type deathEntry struct {
	index                   int // position in x-death
	queue, reason, exchange string
	keys                    []string
	count                   int64
	time                    time.Time
}

// deathEntries reads x-death: the first maxDeathEntries entries, plus the
// last (oldest) one so the first death is known even in a huge array.
func (p *metaParser) deathEntries() []deathEntry {
	v, ok := p.h.get(hXDeath)
	if !ok {
		return nil
	}
	arr, ok := asArray(v)
	if !ok {
		p.r.p.add("x-death: expected array, got %s", hdrTypeName(v))
		return nil
	}
	idx := make([]int, 0, min(arr.n, maxDeathEntries+1))
	for i := 0; i < arr.n && i < maxDeathEntries; i++ {
		idx = append(idx, i)
	}
	if arr.n > maxDeathEntries {
		p.r.p.add("x-death: %d entries, only the first %d and the last read", arr.n, maxDeathEntries)
		idx = append(idx, arr.n-1)
	}
	var out []deathEntry
	for _, i := range idx {
		path := fmt.Sprintf("x-death[%d]", i)
		ev := arr.at(i)
		t, ok := asTable(ev)
		if !ok {
			p.r.p.add("%s: expected table, got %s", path, hdrTypeName(ev))
			continue
		}
		e := deathEntry{index: i}
		if e.queue, ok = p.r.name(t, "queue", path+".queue"); !ok {
			if _, present := t.get("queue"); !present {
				p.r.p.add("%s.queue: missing", path)
			}
		}
		e.reason, _ = p.r.str(t, "reason", path+".reason", 64)
		e.exchange, _ = p.r.name(t, "exchange", path+".exchange")
		e.count, _ = p.r.integer(t, "count", path+".count", true)
		if e.count < 0 {
			p.r.p.add("%s.count: negative (%d)", path, e.count)
			e.count = 0
		}
		e.time, _ = p.r.timestamp(t, "time", path+".time", true)
		e.keys = p.routingKeys(t, path+".routing-keys")
		out = append(out, e)
	}
	return out
}

// routingKeys reads an entry's routing-keys array (a lone string is kept too).
func (p *metaParser) routingKeys(t hdrTable, path string) []string {
	v, ok := t.get("routing-keys")
	if !ok {
		return nil
	}
	arr, ok := asArray(v)
	if !ok {
		p.r.p.add("%s: expected array, got %s", path, hdrTypeName(v))
		if s, _, ok := hdrString(v, maxNameLen); ok {
			return []string{s}
		}
		return nil
	}
	var keys []string
	for i := 0; i < arr.n && i < maxRoutingKeys; i++ {
		ev := arr.at(i)
		s, _, ok := hdrString(ev, maxNameLen)
		if !ok {
			p.r.p.add("%s[%d]: expected string, got %s", path, i, hdrTypeName(ev))
			continue
		}
		keys = append(keys, s)
	}
	return keys
}

// rabbit fills Meta from the broker's own dead-lettering headers.
func (p *metaParser) rabbit() {
	m := p.meta
	entries := p.deathEntries()
	r, h := p.r, p.h
	lastQ, hasLastQ := r.name(h, hLastDeathQueue, hLastDeathQueue)
	lastR, hasLastR := r.str(h, hLastDeathReason, hLastDeathReason, 64)
	lastX, hasLastX := r.name(h, hLastDeathExchange, hLastDeathExchange)
	firstQ, hasFirstQ := r.name(h, hFirstDeathQueue, hFirstDeathQueue)
	firstR, hasFirstR := r.str(h, hFirstDeathReason, hFirstDeathReason, 64)
	firstX, hasFirstX := r.name(h, hFirstDeathExchange, hFirstDeathExchange)

	newest := deathEntry{} // x-death[0], when readable
	if len(entries) > 0 && entries[0].index == 0 {
		newest = entries[0]
	}
	switch {
	case hasLastQ && lastQ != "":
		m.Source = lastQ
	case newest.queue != "":
		m.Source = newest.queue
	case hasFirstQ && firstQ != "":
		m.Source = firstQ
	default:
		m.SourceNote = "x-death names no readable source queue"
	}
	reason := ""
	switch {
	case hasLastR:
		reason = lastR
	case newest.reason != "":
		reason = newest.reason
	case hasFirstR:
		reason = firstR
	}
	m.Reason = parseReason(reason, &p.r)

	var chosen *deathEntry
	for i := range entries {
		e := &entries[i]
		if e.queue == m.Source && (chosen == nil || (e.reason == reason && chosen.reason != reason)) {
			chosen = e
		}
		if e.queue == m.Source && m.Source != "" {
			m.Attempts = addClampedInt(m.Attempts, e.count)
		}
		if !e.time.IsZero() && (m.FirstDeath.IsZero() || e.time.Before(m.FirstDeath)) {
			m.FirstDeath = e.time
		}
	}
	m.LastDeath = newest.time
	switch {
	case chosen != nil && m.Source != "":
		m.Exchange, m.RoutingKeys = chosen.exchange, chosen.keys
	case hasLastX && m.Source == lastQ:
		m.Exchange = lastX
	case hasFirstX && m.Source == firstQ:
		m.Exchange = firstX
	}
	if m.Source != "" && m.Source == p.dlq {
		m.SourceNote = fmt.Sprintf("the last death was in %s itself: the original queue cannot be derived", p.dlq)
		m.Source, m.Attempts = "", 0
	}

	fq := firstQ
	if !hasFirstQ && len(entries) > 0 {
		fq = entries[len(entries)-1].queue
	}
	p.identity = []string{string(DialectRabbitMQ), fq, unixString(m.FirstDeath)}
}

// parseReason maps a broker reason to a Reason, noting unknown ones.
func parseReason(s string, r *hdrReader) Reason {
	switch Reason(s) {
	case ReasonRejected, ReasonExpired, ReasonMaxLen, ReasonDeliveryLimit:
		return Reason(s)
	case "":
		return ReasonUnknown
	}
	r.p.add("dead-letter reason %q not recognised", TruncateUTF8(s, 40))
	return ReasonUnknown
}

// javaTypeRE matches "com.foo.BarException" (optionally followed by ": msg")
// at the start of a stack trace's first line.
var javaTypeRE = regexp.MustCompile(`^([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+)(?::\s?(.*))?$`)

// spring fills Meta from Spring AMQP's RepublishMessageRecoverer headers.
func (p *metaParser) spring() {
	m, r, h := p.meta, p.r, p.h
	m.Reason = ReasonException
	m.Exception, _ = r.str(h, hSpringMessage, hSpringMessage, maxExceptionLen)
	m.ExceptionType, _ = r.str(h, hSpringType, hSpringType, maxNameLen)
	if v, ok := h.get(hSpringStack); ok {
		stack, _, ok := hdrString(v, maxExceptionLen)
		if !ok {
			p.r.p.add("%s: expected string, got %s", hSpringStack, hdrTypeName(v))
		}
		first, _, _ := strings.Cut(stack, "\n")
		if g := javaTypeRE.FindStringSubmatch(strings.TrimSpace(first)); g != nil {
			if m.ExceptionType == "" {
				m.ExceptionType = g[1]
			}
			if m.Exception == "" {
				m.Exception = g[2]
			}
		}
	}
	exch, hasExch := r.name(h, hSpringExchange, hSpringExchange)
	rk, hasRK := r.name(h, hSpringRoutingKey, hSpringRoutingKey)
	m.Exchange = exch
	if hasRK {
		m.RoutingKeys = []string{rk}
	}
	switch {
	case !hasExch || !hasRK:
		m.SourceNote = "Spring headers lack x-original-exchange or x-original-routingKey: the source queue cannot be derived"
	case exch == "":
		m.Source = rk
		if rk == "" {
			m.SourceNote = "x-original-routingKey is empty: the source queue cannot be derived"
		}
	default:
		m.NeedsRoute = true
		m.SourceNote = fmt.Sprintf("published to exchange %q with routing key %q: the source queue must be resolved through the exchange's bindings", exch, rk)
	}
	p.identity = []string{string(DialectSpring), exch, rk, m.Exception}
}

// mtQueueSuffix returns "_error" or "_skipped" when dlq ends with it.
func mtQueueSuffix(dlq string) string {
	for _, s := range []string{"_error", "_skipped"} {
		if strings.HasSuffix(dlq, s) && len(dlq) > len(s) {
			return s
		}
	}
	return ""
}

// massTransit fills Meta from MassTransit's _error / _skipped headers.
func (p *metaParser) massTransit() {
	m, r, h := p.meta, p.r, p.h
	reason, _ := r.str(h, hMTReason, hMTReason, 64)
	hasFault := hasPrefixKey(p.raw, hMTFaultPrefix)
	switch {
	case strings.EqualFold(reason, "fault"):
		m.Reason = ReasonException
	case strings.EqualFold(reason, "dead-letter") || strings.EqualFold(reason, "skip") || strings.EqualFold(reason, "skipped"):
		m.Reason = ReasonSkipped
	case mtQueueSuffix(p.dlq) == "_skipped":
		m.Reason = ReasonSkipped
	case hasFault || mtQueueSuffix(p.dlq) == "_error":
		m.Reason = ReasonException
	default:
		m.Reason = ReasonUnknown
	}
	m.ExceptionType, _ = r.str(h, hMTExcType, hMTExcType, maxNameLen)
	m.Exception, _ = r.str(h, hMTMessage, hMTMessage, maxExceptionLen)
	if ts, ok := r.timestamp(h, hMTTimestamp, hMTTimestamp, false); ok {
		m.FirstDeath, m.LastDeath = ts, ts
	}
	if n, ok := r.integer(h, hMTRetryCount, hMTRetryCount, false); ok {
		if n < 0 {
			p.r.p.add("%s: negative (%d)", hMTRetryCount, n)
		} else {
			m.Attempts = addClampedInt(1, n)
		}
	}
	addr, _ := r.str(h, hMTInputAddress, hMTInputAddress, maxFieldLen)
	if q := lastPathSegment(addr); q != "" {
		m.Source = q
	} else if s := mtQueueSuffix(p.dlq); s != "" {
		m.Source = strings.TrimSuffix(p.dlq, s)
		m.SourceNote = "derived from the queue name (no usable MT-Fault-InputAddress)"
	} else {
		m.SourceNote = "no usable MT-Fault-InputAddress and the queue name has no _error or _skipped suffix: the source queue cannot be derived"
	}
	p.identity = []string{string(DialectMassTransit), addr, p.rawString(hMTTimestamp)}
}

// lastPathSegment returns the queue named by a MassTransit address such as
// "rabbitmq://host/vhost/orders?bind=true" or "queue:orders".
func lastPathSegment(addr string) string {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return ""
	}
	path := addr
	if u, err := url.Parse(addr); err == nil {
		path = u.EscapedPath()
		if u.Opaque != "" {
			path = u.Opaque
		}
	} else if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	path = strings.TrimRight(path, "/")
	seg := path[strings.LastIndex(path, "/")+1:]
	if u, err := url.PathUnescape(seg); err == nil {
		seg = u
	}
	if len(seg) > maxNameLen {
		return ""
	}
	return seg
}

// nServiceBus fills Meta from NServiceBus error-queue headers.
func (p *metaParser) nServiceBus() {
	m, r, h := p.meta, p.r, p.h
	m.Reason = ReasonException
	m.ExceptionType, _ = r.str(h, hNSBExcType, hNSBExcType, maxNameLen)
	m.Exception, _ = r.str(h, hNSBExcMessage, hNSBExcMessage, maxExceptionLen)
	if ts, ok := r.timestamp(h, hNSBTimeOfFailure, hNSBTimeOfFailure, false); ok {
		m.FirstDeath, m.LastDeath = ts, ts
	}
	// Attempts: the rounds NServiceBus recorded (one plus its delayed
	// retries) plus the immediate retries where it recorded them; 0
	// (unknown) when it recorded neither.
	delayed, hasDelayed := r.integer(h, hNSBRetries, hNSBRetries, false)
	immediate, hasImmediate := r.integer(h, hNSBFLRetries, hNSBFLRetries, false)
	if hasDelayed || hasImmediate {
		m.Attempts = addClampedInt(addClampedInt(1, delayed), immediate)
	}
	failedQ, _ := r.str(h, hNSBFailedQ, hNSBFailedQ, maxFieldLen)
	q, _, _ := strings.Cut(strings.TrimSpace(failedQ), "@")
	switch {
	case q == "":
		m.SourceNote = "NServiceBus.FailedQ is missing or empty: the source queue cannot be derived"
	case len(q) > maxNameLen:
		m.SourceNote = "NServiceBus.FailedQ is too long to be a queue name"
	default:
		m.Source = q
	}
	p.identity = []string{string(DialectNServiceBus), failedQ, p.rawString(hNSBTimeOfFailure)}
}
