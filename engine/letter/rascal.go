package letter

import (
	"fmt"
	"strconv"
)

// Header names of rascal (the Node.js library): everything it records about
// a failure is in one nested table, headers.rascal.
const (
	hRascal              = "rascal"
	hRascalOriginalQueue = "originalQueue" // the queue the subscription read
	hRascalRecovery      = "recovery"      // recovery.<queue>.{republished, forwarded, immediateNack, xDeath}
	hRascalError         = "error"         // error.{message, code}: the handler's error
)

// rascalTable returns headers.rascal when it is a table that records a
// failure: an error or recovery state, or an original queue on a message
// that no broker dead-lettered (rascal's forward recovery).
func (p *metaParser) rascalTable(hasDeath bool) (hdrTable, bool) {
	v, ok := p.h.get(hRascal)
	if !ok {
		return hdrTable{}, false
	}
	t, ok := asTable(v)
	if !ok {
		return hdrTable{}, false
	}
	_, hasErr := t.get(hRascalError)
	_, hasRec := t.get(hRascalRecovery)
	_, hasQ := t.get(hRascalOriginalQueue)
	return t, hasErr || hasRec || (hasQ && !hasDeath)
}

// rascal fills Meta from rascal's headers, for its three recovery
// strategies:
//   - forward: rascal publishes the failed message to the DLQ itself, with
//     no x-death; the source is rascal.originalQueue and the attempts are
//     rascal.recovery.<queue>.forwarded;
//   - republish then nack: rascal republished it to its queue
//     recovery.<queue>.republished times, then nacked it and the broker
//     dead-lettered it (x-death count 1): attempts are both added;
//   - republish with immediateNack: rascal marks the copy with
//     recovery.<queue>.immediateNack and the x-death it saw, and nacks any
//     redelivery whose x-death is not newer than that, before its handler
//     runs. A replayed copy without x-death would be refused, so Meta.Refusal
//     says so (the replay removes that state: ReplayHeaders).
//
// The exception is rascal.error.message, its type rascal.error.code; the
// failure time is the broker's, where it dead-lettered the message.
func (p *metaParser) rascal(t hdrTable, hasDeath bool) {
	m := p.meta
	var deathSource string
	if hasDeath {
		p.rabbit()
		deathSource = m.Source
	}
	path := func(s string) string { return hRascal + "." + s }
	q, _ := p.r.name(t, hRascalOriginalQueue, path(hRascalOriginalQueue))
	switch {
	case q != "" && q == p.dlq:
		m.SourceNote = fmt.Sprintf("rascal.originalQueue names %s itself: the original queue cannot be derived", p.dlq)
		m.Source, m.Attempts = "", 0
	case q != "":
		if q != deathSource {
			m.Attempts = 0 // x-death counted another queue
		}
		m.Source, m.SourceNote = q, ""
	case m.Source == "":
		m.SourceNote = "rascal headers name no originalQueue: the source queue cannot be derived"
	}
	if !hasDeath {
		m.Reason = ReasonException
	}

	if et, ok := asTable(mustGet(t, hRascalError)); ok {
		m.Exception, _ = p.r.str(et, "message", path("error.message"), maxExceptionLen)
		m.ExceptionType = rascalCode(et, &p.r)
		p.died = true
	} else if v, present := t.get(hRascalError); present {
		p.r.p.add("%s: expected table, got %s", path(hRascalError), hdrTypeName(v))
		p.died = true
	}

	var republished, forwarded int64
	if m.Source != "" {
		if rt, ok := asTable(mustGet(t, hRascalRecovery)); ok {
			if st, ok := asTable(mustGet(rt, m.Source)); ok {
				base := path(hRascalRecovery + "." + m.Source)
				republished = p.count(st, "republished", base)
				forwarded = p.count(st, "forwarded", base)
				if v, ok := st.get("immediateNack"); ok && v != false && v != nil {
					m.Refusal = fmt.Sprintf("rascal.recovery.%s.immediateNack is set: rascal nacks a redelivered copy before its handler runs unless its x-death is newer than the one rascal recorded; the replay removes rascal.recovery.%s and rascal.error from each copy, so the handler sees a first delivery", m.Source, m.Source)
				}
			}
		}
	}
	m.Attempts = addClampedInt(addClampedInt(m.Attempts, republished), forwarded)
	p.identity = append([]string{string(DialectRascal), m.Source, m.ExceptionType, m.Exception,
		strconv.FormatInt(republished, 10), strconv.FormatInt(forwarded, 10)}, p.identity...)
}

// count reads a non-negative counter of a rascal recovery table.
func (p *metaParser) count(t hdrTable, key, base string) int64 {
	n, ok := p.r.integer(t, key, base+"."+key, false)
	if !ok {
		return 0
	}
	if n < 0 {
		p.r.p.add("%s.%s: negative (%d)", base, key, n)
		return 0
	}
	return n
}

// rascalCode reads rascal.error.code: Node error codes are strings
// ("ECONNREFUSED"), but an application may set a number.
func rascalCode(et hdrTable, r *hdrReader) string {
	v, ok := et.get("code")
	if !ok || v == nil {
		return ""
	}
	if s, _, ok := hdrString(v, maxNameLen); ok {
		return s
	}
	if n, ok := hdrInt64(v); ok {
		return strconv.FormatInt(n, 10)
	}
	r.p.add("%s.error.code: expected string or integer, got %s", hRascal, hdrTypeName(v))
	return ""
}
