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
	if len(paths) == 0 {
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
	for _, p := range paths {
		v = hide(v, p.steps, &hidden)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, nil, fmt.Errorf("redact: encode: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), hidden, nil
}

// hide replaces what steps reach in v.
func hide(v any, steps []step, hidden *[]string) any {
	if len(steps) == 0 {
		collect(v, hidden)
		return Hidden
	}
	s, rest := steps[0], steps[1:]
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			if s.any || (s.index < 0 && k == s.key) {
				x[k] = hide(child, rest, hidden)
			}
		}
	case []any:
		for i, child := range x {
			if s.any || s.index == i {
				x[i] = hide(child, rest, hidden)
			}
		}
	}
	return v
}

// collect adds the strings and numbers in v to hidden.
func collect(v any, hidden *[]string) {
	switch x := v.(type) {
	case string:
		if x != "" {
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
