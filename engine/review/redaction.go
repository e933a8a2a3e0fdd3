package review

import (
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
	"sort"
	"strings"
)

// redactor applies a Redactor to the views of one preview's messages. A nil
// Redactor hides nothing.
type redactor struct {
	r   engine.Redactor
	dlq string
	// groups are the failure groups whose text quoted a hidden value:
	// their names are hidden in the preview's arrivals too.
	groups map[string]bool
}

func newRedactor(r engine.Redactor, dlq string) *redactor {
	return &redactor{r: r, dlq: dlq, groups: map[string]bool{}}
}

// headers hides the rules' header values in meta's texts, and notes its
// failure group when that quoted one.
func (x *redactor) headers(m letter.Message, meta *letter.Meta) []string {
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
func (x *redactor) excerpt(m letter.Message, meta *letter.Meta, n int) string {
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
func (x *redactor) arrivals(a *engine.Arrivals) {
	if a == nil || len(x.groups) == 0 {
		return
	}
	for i := range a.Groups {
		if x.groups[a.Groups[i].Key] {
			a.Groups[i].Key, a.Groups[i].Type = engine.Hidden, engine.Hidden
		}
	}
}

// hideIn replaces the hidden values in meta's texts (exception, its type,
// the failure group, the source note, the problems) and reports whether
// any was found.
func hideIn(meta *letter.Meta, hidden []string) bool {
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
			s = strings.ReplaceAll(s, v, engine.Hidden)
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
func (s *Base) ViewMeta(dlq string, m letter.Message) letter.Meta {
	return s.Viewed(dlq, m, s.ParseMeta(dlq, m))
}

// Viewed is ViewMeta for m's metadata already parsed (meta, ParseMeta's).
func (s *Base) Viewed(dlq string, m letter.Message, meta letter.Meta) letter.Meta {
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

// Limits of the headers a sample shows.
const (
	maxShownHeaders     = 20
	maxShownHeaderBytes = 200
)

// shownHeaders are m's headers a sample shows: those with a single value
// (letter.HeaderString), the dead-letter bookkeeping (x-death and the like,
// which the sample's other fields already say) left out, at most
// maxShownHeaders by name, each value cut at maxShownHeaderBytes. A value
// the rules hide — a header's, or a value hidden in the body — reads
// Hidden; when the body cannot be redacted, no header is shown.
func (x *redactor) shownHeaders(m letter.Message) map[string]string {
	var hidden []string
	if x.r != nil {
		hidden = x.r.HiddenHeaders(x.dlq, m.Headers)
		_, h, ok := x.r.RedactBody(x.dlq, m.Body)
		if !ok {
			return nil
		}
		hidden = append(hidden, h...)
	}
	names := make([]string, 0, len(m.Headers))
	for n := range m.Headers {
		if strings.HasPrefix(n, "x-death") || strings.HasPrefix(n, "x-first-death-") || strings.HasPrefix(n, "x-last-death-") {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	out := map[string]string{}
	for _, n := range names {
		v, ok := letter.HeaderString(m.Headers[n])
		if !ok {
			continue
		}
		if len(out) == maxShownHeaders {
			break
		}
		switch {
		case containsString(hidden, v):
			v = engine.Hidden
		default:
			v = letter.TruncateUTF8(hideValues(v, hidden), maxShownHeaderBytes)
		}
		out[n] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func containsString(list []string, v string) bool {
	for _, x := range list {
		if x != "" && x == v {
			return true
		}
	}
	return false
}
