package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Hidden replaces every value a redaction rule hides.
const Hidden = "[redacted]"

// Path is a parsed JSON path into a message body: "$" then steps, each a
// key (".name" or ["name"]), an index ("[0]") or a wildcard (".*" or
// "[*]": every key of an object, every element of an array).
type Path struct {
	raw   string
	steps []step
}

type step struct {
	key   string
	index int // ≥ 0 for an index step
	any   bool
}

// String is the path as written.
func (p Path) String() string { return p.raw }

// ParsePath parses a JSON path such as "$.card.number",
// "$.items[*].email" or `$["odd key"]`.
func ParsePath(s string) (Path, error) {
	p := Path{raw: s}
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), "$")
	if !ok {
		return p, fmt.Errorf("JSON path %q must start with $", s)
	}
	for rest != "" {
		switch {
		case strings.HasPrefix(rest, ".*"):
			p.steps, rest = append(p.steps, step{index: -1, any: true}), rest[2:]
		case strings.HasPrefix(rest, "."):
			end := strings.IndexAny(rest[1:], ".[")
			if end < 0 {
				end = len(rest) - 1
			}
			key := rest[1 : 1+end]
			if key == "" {
				return p, fmt.Errorf("JSON path %q has an empty key", s)
			}
			p.steps, rest = append(p.steps, step{key: key, index: -1}), rest[1+end:]
		case strings.HasPrefix(rest, "["):
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return p, fmt.Errorf("JSON path %q has an unclosed [", s)
			}
			in := rest[1:end]
			switch {
			case in == "*":
				p.steps = append(p.steps, step{index: -1, any: true})
			case len(in) >= 2 && (in[0] == '"' || in[0] == '\'') && in[len(in)-1] == in[0]:
				p.steps = append(p.steps, step{key: in[1 : len(in)-1], index: -1})
			default:
				i, err := strconv.Atoi(in)
				if err != nil || i < 0 {
					return p, fmt.Errorf("JSON path %q: [%s] is neither an index, * nor a quoted key", s, in)
				}
				p.steps = append(p.steps, step{index: i})
			}
			rest = rest[end+1:]
		default:
			return p, fmt.Errorf("JSON path %q: expected . or [ at %q", s, rest)
		}
	}
	if len(p.steps) == 0 {
		return p, fmt.Errorf("JSON path %q names the whole body; name a field", s)
	}
	return p, nil
}

// ErrNotJSON means a body could not be redacted because it is not JSON.
var ErrNotJSON = errors.New("redact: the body is not JSON")

// JSON replaces the values at paths in body by Hidden and returns the
// re-encoded body (object keys sorted) and the hidden values that were
// strings or numbers, so that a caller can hide them elsewhere too (an
// exception message quoting them). A body that is not JSON yields
// ErrNotJSON: the caller must then show nothing of it.
func JSON(body []byte, paths []Path) ([]byte, []string, error) {
	return JSONShow(body, nil, paths)
}

// JSONShow is JSON with an allowlist: when show is not nil, every leaf
// value of body (string, number, true, false, null) that is not at or
// under one of its paths is replaced by Hidden too, in one walk, before
// the values at hide are (hide wins: a value under both is hidden). Object
// keys, and the body's shape, stay. The hidden strings and numbers are
// returned, as JSON's are. With neither show nor hide body is returned
// as it is; a body that is not JSON yields ErrNotJSON.
func JSONShow(body []byte, show, hide []Path) ([]byte, []string, error) {
	if show == nil && len(hide) == 0 {
		return body, nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, nil, ErrNotJSON
	}
	if dec.More() {
		return nil, nil, ErrNotJSON
	}
	var hidden []string
	if show != nil {
		rest := make([][]step, len(show))
		for i, p := range show {
			rest[i] = p.steps
		}
		v = keep(v, rest, &hidden)
	}
	for _, p := range hide {
		v = hideAt(v, p.steps, &hidden)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, nil, fmt.Errorf("redact: encode: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), hidden, nil
}

// keep replaces every leaf of v by Hidden except those that a path of
// show reaches, rest being what is left of each path that reached v: one
// walk, following every path at once.
func keep(v any, rest [][]step, hidden *[]string) any {
	for _, r := range rest {
		if len(r) == 0 {
			return v // a path ends here: v and everything under it is shown
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			var next [][]step
			for _, r := range rest {
				if r[0].any || (r[0].index < 0 && r[0].key == k) {
					next = append(next, r[1:])
				}
			}
			x[k] = keep(child, next, hidden)
		}
		return x
	case []any:
		for i, child := range x {
			var next [][]step
			for _, r := range rest {
				if r[0].any || r[0].index == i {
					next = append(next, r[1:])
				}
			}
			x[i] = keep(child, next, hidden)
		}
		return x
	}
	collect(v, hidden)
	return Hidden
}

// hideAt replaces what steps reach in v.
func hideAt(v any, steps []step, hidden *[]string) any {
	if len(steps) == 0 {
		collect(v, hidden)
		return Hidden
	}
	s, rest := steps[0], steps[1:]
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			if s.any || (s.index < 0 && k == s.key) {
				x[k] = hideAt(child, rest, hidden)
			}
		}
	case []any:
		for i, child := range x {
			if s.any || s.index == i {
				x[i] = hideAt(child, rest, hidden)
			}
		}
	}
	return v
}

// collect adds the strings and numbers in v to hidden.
func collect(v any, hidden *[]string) {
	switch x := v.(type) {
	case string:
		if x != "" && x != Hidden { // already hidden by the allowlist
			*hidden = append(*hidden, x)
		}
	case json.Number:
		*hidden = append(*hidden, x.String())
	case map[string]any:
		for _, c := range x {
			collect(c, hidden)
		}
	case []any:
		for _, c := range x {
			collect(c, hidden)
		}
	}
}

// Values replaces every occurrence of each of values (of three bytes or
// more: shorter ones would hide ordinary words) in s by Hidden.
func Values(s string, values []string) string {
	for _, v := range values {
		if len(v) >= 3 {
			s = strings.ReplaceAll(s, v, Hidden)
		}
	}
	return s
}
