package letter

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// ParseMetaDialect derives a dead-lettered message's metadata (docs/design.md
// "Dead-letter dialects"). dlq is the queue the message was read from:
// MassTransit's source falls back to it without its _error / _skipped
// suffix.
//
// ParseMetaDialect recognises RabbitMQ's own dead-lettering (x-death,
// x-first-death-*, x-last-death-*), Spring AMQP's RepublishMessageRecoverer,
// MassTransit, NServiceBus and rascal, and the in-house dialect d (the zero
// HeaderDialect recognises none); the engine's Service.ParseMeta passes the
// configured one. An in-house dialect's headers win over every other
// convention: the operator named them. A message whose origin cannot be derived gets
// DialectUnknown and an empty Source, with SourceNote saying why; a source
// is never guessed.
//
// It never panics and never fails: header values of the wrong type, missing
// fields and huge tables are listed in Problems and the rest is filled from
// what could be read. Work per message is bounded (at most 64 x-death
// entries are examined, exception texts are cut at 2,000 bytes).
// It fills every field except Excerpt, which is the caller's.
func ParseMetaDialect(dlq string, m Message, d HeaderDialect) (meta Meta) {
	var probs problemList
	defer func() {
		// A safety net only: every reader above is written not to panic, and
		// FuzzParseMeta checks that this note never appears.
		if r := recover(); r != nil {
			meta = Meta{
				Seq: m.Seq, Dialect: DialectUnknown, Reason: ReasonUnknown,
				FailureGroup: string(ReasonUnknown), MessageID: m.MessageID, Size: len(m.Body),
				SourceNote: "headers could not be read",
				Problems:   []string{TruncateUTF8(fmt.Sprintf("internal error reading headers: %v", r), 200)},
			}
			meta.ID = Fingerprint(m.MessageID, m.Body, "panic")
		}
	}()

	meta = Meta{Seq: m.Seq, MessageID: m.MessageID, Size: len(m.Body), Reason: ReasonUnknown}
	p := &metaParser{dlq: dlq, h: hdrTable{plain: m.Headers}, raw: m.Headers, r: hdrReader{p: &probs}, meta: &meta}

	hasDeath := hasDeathHeaders(m.Headers)
	var rascal hdrTable
	meta.Dialect, rascal = p.detectDialect(d, hasDeath)
	switch meta.Dialect {
	case DialectInHouse:
		p.inHouse(d, hasDeath)
	case DialectRascal:
		p.rascal(rascal, hasDeath)
	case DialectRabbitMQ:
		p.rabbit()
	case DialectSpring:
		p.framework(p.spring, hasDeath)
	case DialectMassTransit:
		p.framework(p.massTransit, hasDeath)
	case DialectNServiceBus:
		p.framework(p.nServiceBus, hasDeath)
	default:
		meta.SourceNote = "no dead-letter headers (x-death, x-first-death-*, Spring, MassTransit, NServiceBus, rascal" + inHouseNote(d) + ") found: the source queue cannot be derived"
		p.identity = []string{string(DialectUnknown), unixString(m.Timestamp)}
	}

	if meta.FirstDeath.IsZero() && meta.LastDeath.IsZero() {
		// No failure time to tell a later identical failure from this
		// one: the whole copy identifies it.
		p.identity = append(p.identity, "copy", copyDigest(m))
	}
	p.replay()
	if meta.Source != "" {
		if why := QueueNameProblem(meta.Source); why != "" {
			// Never replayed to a name nobody can check by eye.
			meta.BadTarget = meta.Source
			meta.SourceNote = "no valid target: the queue named in the headers " + why
			meta.Source = ""
		}
	}
	meta.Returned = meta.ReplayID != "" && (p.died || diedAgain(m.Headers))
	meta.FailureGroup = failureGroup(meta.ExceptionType, meta.Exception, meta.Reason)
	meta.ID = Fingerprint(m.MessageID, m.Body, p.identity...)
	meta.Problems = probs.result()
	return meta
}

// metaParser derives one message's Meta. identity collects the dialect's
// failure identity for the fingerprint (see Fingerprint).
type metaParser struct {
	dlq      string
	h        hdrTable
	raw      map[string]any
	r        hdrReader
	meta     *Meta
	identity []string
	// died is set by a dialect whose own failure headers are on the
	// message (rascal.error, the in-house exception header): a replay
	// removes or they mark a new failure, so with a replay id they mean
	// the copy came back.
	died bool
}

// inHouseNote names the in-house dialect's source header for a note.
func inHouseNote(d HeaderDialect) string {
	if !d.Enabled() {
		return ""
	}
	return " or " + d.Source
}

// hasDeathHeaders reports whether the broker dead-lettered the message.
func hasDeathHeaders(h map[string]any) bool {
	_, ok := h[hXDeath]
	return ok || hasPrefixKey(h, "x-first-death-", "x-last-death-")
}

// detectDialect picks the convention whose headers the message carries.
// A framework's headers (Spring, MassTransit, NServiceBus) are detected
// before x-death, but framework then lets the broker's own dead-lettering
// decide the route whenever it names one: see framework.
//
// The in-house dialect, when configured and its headers are present, comes
// first; rascal comes after the others and before x-death (its republish
// then nack strategy leaves both). For rascal the table is returned too.
func (p *metaParser) detectDialect(d HeaderDialect, hasDeath bool) (Dialect, hdrTable) {
	has := func(k string) bool { _, ok := p.raw[k]; return ok }
	if d.matches(p.raw) {
		return DialectInHouse, hdrTable{}
	}
	rascal, isRascal := p.rascalTable(hasDeath)
	switch {
	case has(hNSBFailedQ) || hasPrefixKey(p.raw, hNSBExcPrefix):
		return DialectNServiceBus, hdrTable{}
	case hasPrefixKey(p.raw, hMTFaultPrefix),
		has(hMTReason) && !hasDeath,
		mtQueueSuffix(p.dlq) != "" && !hasDeath && hasPrefixKey(p.raw, "MT-"):
		return DialectMassTransit, hdrTable{}
	case has(hSpringMessage) || has(hSpringStack) || has(hSpringType) ||
		has(hSpringExchange) || has(hSpringRoutingKey):
		return DialectSpring, hdrTable{}
	case isRascal:
		return DialectRascal, rascal
	case hasDeath:
		return DialectRabbitMQ, hdrTable{}
	}
	return DialectUnknown, hdrTable{}
}

// framework reads a message carrying a framework's failure headers with
// parse. When the broker dead-lettered it too (hasDeath), the broker's
// x-death is the authority on where and when it died: an application's
// x-exception-message on a message RabbitMQ dead-lettered itself says why it
// failed, not where it came from. The route, reason, failure times and
// identity are then x-death's; the framework adds its exception and the
// attempts it recorded. Only when x-death names no usable source queue does
// the framework's route stand, with x-death's failure times where the
// framework recorded none.
func (p *metaParser) framework(parse func(), hasDeath bool) {
	parse()
	if !hasDeath {
		return
	}
	fw, fwIdentity := *p.meta, p.identity
	*p.meta = Meta{Seq: fw.Seq, MessageID: fw.MessageID, Size: fw.Size, Reason: ReasonUnknown}
	p.identity = nil
	p.rabbit()
	m := p.meta
	if m.Source == "" {
		first, last := m.FirstDeath, m.LastDeath
		*m, p.identity = fw, fwIdentity
		if m.FirstDeath.IsZero() && m.LastDeath.IsZero() {
			m.FirstDeath, m.LastDeath = first, last
		}
		return
	}
	m.Dialect = DialectRabbitMQ
	m.Exception, m.ExceptionType = fw.Exception, fw.ExceptionType
	m.Attempts = addClampedInt(m.Attempts, int64(fw.Attempts))
	p.identity = append(p.identity, "exception", fw.Exception)
}

// replay reads x-replay-id and x-replay-count and adds them to the identity,
// so a copy that came back from a replay never shares an id with the
// original it replaced.
func (p *metaParser) replay() {
	m := p.meta
	if id, ok := p.r.str(p.h, HeaderReplayID, HeaderReplayID, maxNameLen); ok {
		m.ReplayID = id
		p.identity = append(p.identity, HeaderReplayID, id)
	}
	if v, ok := p.h.get(HeaderReplayCount); ok {
		n, ok := hdrInt64(v)
		switch {
		case !ok:
			p.r.p.add("%s: expected integer, got %s", HeaderReplayCount, hdrDescribe(v))
		case n < 0:
			p.r.p.add("%s: negative (%d)", HeaderReplayCount, n)
		default:
			m.ReplayCount = int(min(n, math.MaxInt32))
		}
		p.identity = append(p.identity, HeaderReplayCount, p.rawString(HeaderReplayCount))
	}
}

// diedAgain reports whether h carries a death: a replay strips the broker's
// death headers from the copy it sends, so any x-death or x-*-death-* header
// is newer than the replay. Framework failure headers (Spring's
// x-exception-*, MassTransit's MT-Fault-* and MT-Reason, NServiceBus's
// ExceptionInfo) count too: frameworks republish failures themselves.
//
// Framework headers survive a replay (it strips only the broker's), so for
// the framework dialects this is only meaningful for a copy read from a
// dead-letter queue, where a replayed copy is found only if it failed again.
// Read in a replay target, a framework copy that is merely waiting would
// look returned.
func diedAgain(h map[string]any) bool {
	for k := range h {
		if IsDeathHeader(k) && k != "x-delivery-count" && k != "x-acquired-count" {
			return true
		}
		switch {
		case k == hSpringMessage, k == hSpringStack, k == hSpringType, k == hMTReason,
			strings.HasPrefix(k, hMTFaultPrefix), strings.HasPrefix(k, hNSBExcPrefix):
			return true
		}
	}
	return false
}

// failureGroup is the normalised "Type: message" when an exception exists,
// else the reason.
func failureGroup(excType, exc string, reason Reason) string {
	var s string
	switch {
	case excType != "" && exc != "":
		s = excType + ": " + exc
	case excType != "":
		s = excType
	default:
		s = exc
	}
	if g := NormaliseException(s); g != "" {
		return g
	}
	return string(reason)
}

// problemList collects the notes that end up in Meta.Problems, capped.
type problemList struct {
	list    []string
	dropped int
}

// add records one problem.
func (p *problemList) add(format string, args ...any) {
	if len(p.list) >= maxProblems {
		p.dropped++
		return
	}
	p.list = append(p.list, TruncateUTF8(fmt.Sprintf(format, args...), 200))
}

// result returns the notes, with a final count of the ones left out.
func (p *problemList) result() []string {
	if p.dropped > 0 {
		return append(p.list, fmt.Sprintf("%d more problems not listed", p.dropped))
	}
	return p.list
}

// hdrReader reads typed values out of one table, reporting every value that
// is present but unreadable under its path (for example "x-death[0].count").
type hdrReader struct {
	p *problemList
}

// str reads path's string value from t: ok is false when absent or unreadable.
func (r hdrReader) str(t hdrTable, key, path string, limit int) (string, bool) {
	v, present := t.get(key)
	if !present {
		return "", false
	}
	s, cut, ok := hdrString(v, limit)
	if !ok {
		r.p.add("%s: expected string, got %s", path, hdrTypeName(v))
		return "", false
	}
	if cut {
		r.p.add("%s: longer than %d bytes, truncated", path, limit)
	}
	return s, true
}

// integer reads path's integer value from t. strict accepts only Go integer
// types (what the broker writes into x-death); otherwise integral floats,
// decimals and numeric strings are read too.
func (r hdrReader) integer(t hdrTable, key, path string, strict bool) (int64, bool) {
	v, present := t.get(key)
	if !present {
		return 0, false
	}
	n, ok := hdrInt64(v)
	if strict && !isGoIntegerValue(v) {
		ok = false
	}
	if !ok {
		r.p.add("%s: expected integer, got %s", path, hdrDescribe(v))
		return 0, false
	}
	return n, true
}

// timestamp reads path's timestamp value from t. strict accepts only a
// time.Time (what the broker writes into x-death); otherwise textual
// timestamps and Unix seconds are read too.
func (r hdrReader) timestamp(t hdrTable, key, path string, strict bool) (time.Time, bool) {
	v, present := t.get(key)
	if !present {
		return time.Time{}, false
	}
	ts, ok := hdrTime(v)
	_, isTime := v.(time.Time)
	switch {
	case isTime && !ok:
		r.p.add("%s: timestamp out of range", path)
		return time.Time{}, false
	case !ok || (strict && !isTime):
		r.p.add("%s: expected timestamp, got %s", path, hdrDescribe(v))
		return time.Time{}, false
	}
	return ts, !ts.IsZero()
}

// name reads a queue, exchange or routing-key name; names longer than an
// AMQP short string are reported and dropped.
func (r hdrReader) name(t hdrTable, key, path string) (string, bool) {
	v, present := t.get(key)
	if !present {
		return "", false
	}
	s, _, ok := hdrString(v, maxNameLen+1)
	if !ok {
		r.p.add("%s: expected string, got %s", path, hdrTypeName(v))
		return "", false
	}
	if len(s) > maxNameLen {
		r.p.add("%s: longer than %d bytes, not a valid name", path, maxNameLen)
		return "", false
	}
	return s, true
}

// hdrDescribe is hdrTypeName plus a short quote of unreadable strings, so
// "expected integer, got string" says which string.
func hdrDescribe(v any) string {
	if s, _, ok := hdrString(v, 24); ok {
		return fmt.Sprintf("%s %q", hdrTypeName(v), s)
	}
	return hdrTypeName(v)
}

// hasPrefixKey reports whether any key of h starts with one of prefixes.
func hasPrefixKey(h map[string]any, prefixes ...string) bool {
	for k := range h {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				return true
			}
		}
	}
	return false
}
