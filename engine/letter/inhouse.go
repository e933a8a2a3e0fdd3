package letter

import (
	"errors"
	"fmt"
	"strings"
)

// HeaderDialect names the headers an in-house framework writes on the
// messages it dead-letters, so that dlqbot derives the same metadata
// for them as for the known frameworks: source queue, exception text and
// attempt count, and optionally the failure time. The zero value recognises
// no in-house dialect.
type HeaderDialect struct {
	// Source is the header holding the queue the message failed in
	// (required when any other field is set).
	Source string
	// Exception is the header holding the exception text (optional).
	Exception string
	// Attempts is the header holding how many times the framework tried the
	// message (optional; an integer or a numeric string).
	Attempts string
	// Time is the header holding the failure time (optional; an AMQP
	// timestamp, RFC 3339 text or Unix seconds).
	Time string
}

// ErrBadDialect is returned for an in-house dialect setting that cannot be used.
var ErrBadDialect = errors.New("bad in-house dialect")

// headerDialectKeys are the keys ParseHeaderDialect accepts, in order.
var headerDialectKeys = []string{"source", "exception", "attempts", "time"}

// ParseHeaderDialect reads an in-house dialect written as comma-separated
// key=header pairs, for example
// "source=x-app-source,exception=x-app-error,attempts=x-app-attempts".
// Keys are source (required), exception, attempts and time; each may
// appear once. An empty string is the zero HeaderDialect.
func ParseHeaderDialect(s string) (HeaderDialect, error) {
	var d HeaderDialect
	if strings.TrimSpace(s) == "" {
		return d, nil
	}
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case part == "":
			return HeaderDialect{}, fmt.Errorf("%w: an empty entry in %q (write key=header pairs separated by commas, e.g. source=x-app-source,exception=x-app-error,attempts=x-app-attempts)", ErrBadDialect, s)
		case !ok || v == "":
			return HeaderDialect{}, fmt.Errorf("%w: %q is not key=header (e.g. source=x-app-source)", ErrBadDialect, part)
		case seen[k]:
			return HeaderDialect{}, fmt.Errorf("%w: %q is given twice", ErrBadDialect, k)
		case len(v) > maxNameLen:
			return HeaderDialect{}, fmt.Errorf("%w: header name for %q is longer than %d bytes", ErrBadDialect, k, maxNameLen)
		}
		seen[k] = true
		switch k {
		case "source":
			d.Source = v
		case "exception":
			d.Exception = v
		case "attempts":
			d.Attempts = v
		case "time":
			d.Time = v
		default:
			return HeaderDialect{}, fmt.Errorf("%w: unknown key %q (known: %s)", ErrBadDialect, k, strings.Join(headerDialectKeys, ", "))
		}
	}
	return d, d.Validate()
}

// Validate reports whether d can be used: the zero value, or a Source with
// header names that are distinct and are not headers dlqbot itself or
// RabbitMQ write.
func (d HeaderDialect) Validate() error {
	if d == (HeaderDialect{}) {
		return nil
	}
	if d.Source == "" {
		return fmt.Errorf("%w: source=<header> is required (the header naming the queue the message failed in)", ErrBadDialect)
	}
	names := map[string]string{}
	for i, h := range []string{d.Source, d.Exception, d.Attempts, d.Time} {
		if h == "" {
			continue
		}
		if other, ok := names[h]; ok {
			return fmt.Errorf("%w: %s and %s name the same header %q", ErrBadDialect, other, headerDialectKeys[i], h)
		}
		names[h] = headerDialectKeys[i]
		if IsRemovedHeader(h) || h == HeaderReplayID || h == HeaderReplayCount || h == HeaderReplayedFrom {
			return fmt.Errorf("%w: %q is a header RabbitMQ or dlqbot itself writes, not the framework's", ErrBadDialect, h)
		}
	}
	return nil
}

// ResetHeaders lists the headers a replayed copy loses (ReplayHeaders'
// reset): the framework's record of the failure — exception, attempts and
// time — so that it retries a failing copy afresh, as a replay does for the
// broker's death headers and rascal's state. The source header stays.
func (d HeaderDialect) ResetHeaders() []string {
	var out []string
	for _, h := range []string{d.Exception, d.Attempts, d.Time} {
		if h != "" {
			out = append(out, h)
		}
	}
	return out
}

// Enabled reports whether d recognises any message.
func (d HeaderDialect) Enabled() bool { return d.Source != "" }

// String renders d in ParseHeaderDialect's syntax.
func (d HeaderDialect) String() string {
	var parts []string
	for i, h := range []string{d.Source, d.Exception, d.Attempts, d.Time} {
		if h != "" {
			parts = append(parts, headerDialectKeys[i]+"="+h)
		}
	}
	return strings.Join(parts, ",")
}

// matches reports whether the message's headers carry d's source or
// exception header.
func (d HeaderDialect) matches(h map[string]any) bool {
	if !d.Enabled() {
		return false
	}
	_, src := h[d.Source]
	_, exc := h[d.Exception]
	return src || (d.Exception != "" && exc)
}

// inHouse fills Meta from the configured in-house headers. When the broker
// also dead-lettered the message (the framework nacked it), the reason and
// death times are the broker's and its x-death count for the source is
// added to the framework's attempts.
func (p *metaParser) inHouse(d HeaderDialect, hasDeath bool) {
	m, r, h := p.meta, p.r, p.h
	var deathSource string
	if hasDeath {
		p.rabbit()
		deathSource = m.Source
	} else {
		m.Reason = ReasonException
	}
	q, _ := r.name(h, d.Source, d.Source)
	switch {
	case q != "" && q == p.dlq:
		m.SourceNote = fmt.Sprintf("%s names %s itself: the original queue cannot be derived", d.Source, p.dlq)
		m.Source, m.Attempts = "", 0
	case q != "":
		if q != deathSource {
			m.Attempts = 0
		}
		m.Source, m.SourceNote = q, ""
	case m.Source == "":
		m.SourceNote = fmt.Sprintf("%s is missing or empty: the source queue cannot be derived", d.Source)
	}
	if d.Exception != "" {
		if _, present := h.get(d.Exception); present {
			m.Exception, _ = r.str(h, d.Exception, d.Exception, maxExceptionLen)
			p.died = true
		}
	}
	if d.Attempts != "" {
		if n, ok := r.integer(h, d.Attempts, d.Attempts, false); ok {
			if n < 0 {
				r.p.add("%s: negative (%d)", d.Attempts, n)
			} else {
				m.Attempts = addClampedInt(m.Attempts, n)
			}
		}
	}
	if d.Time != "" {
		if ts, ok := r.timestamp(h, d.Time, d.Time, false); ok {
			m.LastDeath = ts
			if m.FirstDeath.IsZero() || ts.Before(m.FirstDeath) {
				m.FirstDeath = ts
			}
		}
	}
	p.identity = append([]string{string(DialectInHouse), m.Source, m.Exception,
		p.rawString(d.Attempts), p.rawString(d.Time)}, p.identity...)
}
