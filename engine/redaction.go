package engine

import "strings"

// Hidden replaces every value a redaction rule hides.
const Hidden = "[redacted]"

// Redactor holds the operator's redaction rules (the permissions file's
// redaction section). The engine applies them where a preview's view of a
// message is made, so that what Slack, the API, MCP, the terminal and the
// logs show is already redacted.
type Redactor interface {
	// HiddenHeaders returns the values of headers (a message of dlq) that
	// must never be shown.
	HiddenHeaders(dlq string, headers map[string]any) []string
	// RedactBody returns body with the values the rules name hidden, and
	// those values; ok is false when body cannot be redacted (then none of
	// it may be shown).
	RedactBody(dlq string, body []byte) (out []byte, hidden []string, ok bool)
}

// redactor applies a Redactor to the views of one preview's messages. A nil
// Redactor hides nothing.
type redactor struct {
	r   Redactor
	dlq string
	// groups are the failure groups whose text quoted a hidden value:
	// their names are hidden in the preview's arrivals too.
	groups map[string]bool
}

func newRedactor(r Redactor, dlq string) *redactor {
	return &redactor{r: r, dlq: dlq, groups: map[string]bool{}}
}

// headers hides the rules' header values in meta's texts, and notes its
// failure group when that quoted one.
func (x *redactor) headers(m Message, meta *Meta) []string {
	if x.r == nil {
		return nil
	}
	hidden := x.r.HiddenHeaders(x.dlq, m.Headers)
	if group := meta.FailureGroup; len(hidden) > 0 && hideIn(meta, hidden) {
		x.groups[group] = true
	}
	return hidden
}

// excerpt is the redacted excerpt of m's body, at most n bytes (none when
// n ≤ 0 or the body cannot be redacted); it also hides the body's hidden
// values in meta's texts.
func (x *redactor) excerpt(m Message, meta *Meta, n int) string {
	body := m.Body
	if x.r != nil {
		out, hidden, ok := x.r.RedactBody(x.dlq, body)
		if !ok {
			return ""
		}
		if group := meta.FailureGroup; hideIn(meta, hidden) {
			x.groups[group] = true
		}
		body = out
	}
	if n <= 0 {
		return ""
	}
	return excerpt(body, n)
}

// arrivals hides the names of failure groups that quoted a hidden value,
// and their types (read before the rules applied, a type may be the
// hidden value).
func (x *redactor) arrivals(a *Arrivals) {
	if a == nil || len(x.groups) == 0 {
		return
	}
	for i := range a.Groups {
		if x.groups[a.Groups[i].Key] {
			a.Groups[i].Key, a.Groups[i].Type = Hidden, Hidden
		}
	}
}

// hideIn replaces the hidden values in meta's texts (exception, its type,
// the failure group, the source note, the problems) and reports whether
// any was found.
func hideIn(meta *Meta, hidden []string) bool {
	found := false
	meta.Problems = append([]string(nil), meta.Problems...) // the scan's copy shares it
	for _, s := range []*string{&meta.Exception, &meta.ExceptionType, &meta.FailureGroup, &meta.SourceNote} {
		if r := hideValues(*s, hidden); r != *s {
			*s, found = r, true
		}
	}
	for i, p := range meta.Problems {
		if r := hideValues(p, hidden); r != p {
			meta.Problems[i], found = r, true
		}
	}
	return found
}

// hideValues replaces each value of three bytes or more in s by Hidden
// (shorter ones would hide ordinary words).
func hideValues(s string, values []string) string {
	for _, v := range values {
		if len(v) >= 3 && strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Hidden)
		}
	}
	return s
}

// viewMeta is m's metadata (ParseMeta) with the redaction rules' values
// hidden in its texts — exception, its type, the failure group, the
// source note, the problems — for what shows a message's failure outside
// a preview: a check report's groups and examples (follow-ups too), a
// returned copy's Failure.Detail, and the tap's record of returns. Ids
// and counts are ParseMeta's.
func (s *Service) viewMeta(dlq string, m Message) Meta {
	meta := s.ParseMeta(dlq, m)
	if s.d.Redactor == nil {
		return meta
	}
	hidden := s.d.Redactor.HiddenHeaders(dlq, m.Headers)
	if _, h, ok := s.d.Redactor.RedactBody(dlq, m.Body); ok {
		hidden = append(hidden, h...)
	}
	if len(hidden) > 0 {
		hideIn(&meta, hidden)
	}
	return meta
}
