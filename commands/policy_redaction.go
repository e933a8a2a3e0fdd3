package commands

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/stroma/dlqbot/engine/letter"
	"github.com/stroma/dlqbot/redact"
)

// Redaction is what the policy hides of every message before anything
// leaves the process (Slack, the API, MCP, the terminal, logs):
//
//	redaction:
//	  excerpt_bytes: 120               # default: the engine's (200); 0: no payload excerpt at all
//	  headers: [x-card, x-customer]    # these headers' values are never shown
//	  json_paths: [$.card.number, $.customer.email, "$.items[*].iban"]
//	  show_headers: [x-tenant, x-request-id]           # only these headers' values are shown
//	  show_json_paths: [$.order_id, "$.items[*].sku"]  # only these values of a JSON body are shown
//
// A header's value is hidden wherever it would show (an exception message
// read from it included); a JSON path's value is replaced in the payload
// excerpt, and hidden in exception text too. The show_ lists are
// allowlists: with show_headers every other header's value is hidden (the
// broker's dead-lettering headers and dlqbot's own replay headers, which
// are not the application's, excepted); with show_json_paths every other
// leaf value of the body is. The hide lists win over the show lists. A
// body that is not JSON shows no excerpt when json_paths or
// show_json_paths are set.
type Redaction struct {
	// ExcerptBytes is the longest payload excerpt; nil leaves the
	// engine's default, 0 shows none.
	ExcerptBytes *int
	Headers      []string
	JSONPaths    []redact.Path
	// ShowHeaders and ShowJSONPaths are the allowlists; nil when not set.
	ShowHeaders   []string
	ShowJSONPaths []redact.Path
}

// ChannelRule says where previews of the DLQs matching Queues may be
// posted: only in the Slack channels Allow lists.
//
//	channels:
//	  - queues: ["payments.*"]
//	    allow: [C0PAYMENTS]
type ChannelRule struct {
	Queues []string
	Allow  []string
}

var channelIDPattern = regexp.MustCompile(`^[CGD][A-Z0-9_-]+$`)

func parseRedaction(n *yaml.Node, r *Redaction) error {
	keys := []string{"excerpt_bytes", "headers", "json_paths", "show_headers", "show_json_paths"}
	err := fields(n, "redaction", keys, func(key string, v *yaml.Node) error {
		switch key {
		case "excerpt_bytes":
			s, err := scalar(v, "excerpt_bytes")
			if err != nil {
				return err
			}
			b, err := strconv.Atoi(s)
			if err != nil || b < 0 || b > 2000 {
				return errAt(v, "excerpt_bytes %q must be a whole number from 0 (no excerpt) to 2000", s)
			}
			r.ExcerptBytes = &b
			return nil
		case "headers":
			return headerNames(v, key, &r.Headers)
		case "show_headers":
			r.ShowHeaders = []string{}
			if err := headerNames(v, key, &r.ShowHeaders); err != nil {
				return err
			}
			if len(r.ShowHeaders) == 0 {
				return errAt(v, "show_headers is empty; list the headers whose values may be shown, or list every header under headers: to hide them all")
			}
			return nil
		case "show_json_paths":
			r.ShowJSONPaths = []redact.Path{}
			if err := jsonPaths(v, key, &r.ShowJSONPaths); err != nil {
				return err
			}
			if len(r.ShowJSONPaths) == 0 {
				return errAt(v, "show_json_paths is empty; list the JSON paths whose values may be shown, or set excerpt_bytes: 0 to show no payload")
			}
			return nil
		}
		return jsonPaths(v, key, &r.JSONPaths)
	})
	if err != nil {
		return err
	}
	// A name on both lists is hidden (hide wins); on both it is a mistake
	// worth naming.
	for _, h := range r.ShowHeaders {
		if slices.ContainsFunc(r.Headers, func(x string) bool { return strings.EqualFold(x, h) }) {
			return errAt(n, "header %q is under both headers (hidden) and show_headers; hidden wins, so remove it from one of them", h)
		}
	}
	for _, p := range r.ShowJSONPaths {
		if slices.ContainsFunc(r.JSONPaths, func(x redact.Path) bool { return x.String() == p.String() }) {
			return errAt(n, "JSON path %q is under both json_paths (hidden) and show_json_paths; hidden wins, so remove it from one of them", p.String())
		}
	}
	return nil
}

// headerNames appends the header names listed at v to names.
func headerNames(v *yaml.Node, key string, names *[]string) error {
	return each(v, key, func(h *yaml.Node) error {
		s, err := scalar(h, "a header name")
		if err == nil && strings.TrimSpace(s) == "" {
			err = errAt(h, "a header name is empty")
		}
		*names = append(*names, strings.TrimSpace(s))
		return err
	})
}

// jsonPaths appends the JSON paths listed at v to paths.
func jsonPaths(v *yaml.Node, key string, paths *[]redact.Path) error {
	return each(v, key, func(j *yaml.Node) error {
		s, err := scalar(j, "a JSON path")
		if err != nil {
			return err
		}
		p, err := redact.ParsePath(s)
		if err != nil {
			return errAt(j, "%v (write paths like $.card.number or $.items[*].email)", err)
		}
		*paths = append(*paths, p)
		return nil
	})
}

func parseChannels(n *yaml.Node, p *Policy) error {
	return each(n, "channels", func(item *yaml.Node) error {
		var c ChannelRule
		err := fields(item, "a channel rule", []string{"queues", "allow"}, func(key string, v *yaml.Node) error {
			if key == "allow" {
				var err error
				c.Allow, err = idList(v, "channel", channelIDPattern, "a Slack channel id (like C0123ABCD; in Slack, the channel's details show it)")
				return err
			}
			return each(v, "queues", func(q *yaml.Node) error {
				s, err := scalar(q, "a queue pattern")
				if err == nil {
					err = checkGlob(q, s)
				}
				c.Queues = append(c.Queues, s)
				return err
			})
		})
		switch {
		case err != nil:
			return err
		case len(c.Queues) == 0:
			return errAt(item, "a channel rule names no queues:")
		case len(c.Allow) == 0:
			return errAt(item, "a channel rule allows no channel; list the channels previews of these queues may be posted in under allow:")
		}
		p.Channels = append(p.Channels, c)
		return nil
	})
}

// ExcerptBytes is the policy's excerpt size: ok is false when it leaves
// the engine's default.
func (p *Policy) ExcerptBytes() (n int, ok bool) {
	if p == nil || p.Redaction.ExcerptBytes == nil {
		return 0, false
	}
	return *p.Redaction.ExcerptBytes, true
}

// HiddenHeaders returns the values of msg's headers that the policy's
// redaction hides, nested values included: those of the headers it names
// (matched without regard to case), and with show_headers those of every
// header it does not list but the broker's dead-lettering headers and
// dlqbot's replay headers. The caller hides them wherever they would
// show. It implements engine.Redactor.
func (p *Policy) HiddenHeaders(_ string, headers map[string]any) []string {
	if p == nil {
		return nil
	}
	var hidden []string
	for k, v := range headers {
		if p.Redaction.hidesHeader(k) {
			hidden = append(hidden, headerStrings(v)...)
		}
	}
	return hidden
}

// hidesHeader reports whether the value of header name is hidden.
func (r *Redaction) hidesHeader(name string) bool {
	fold := func(x string) bool { return strings.EqualFold(x, name) }
	if slices.ContainsFunc(r.Headers, fold) {
		return true
	}
	return r.ShowHeaders != nil && !slices.ContainsFunc(r.ShowHeaders, fold) && !bookkeeping(name)
}

// bookkeeping reports whether header name is one the broker writes when it
// dead-letters a message (x-death, x-first-death-*, x-last-death-*) or
// dlqbot writes on a replayed copy: queue names, reasons, counts and ids,
// not the application's data, and what a preview needs to say where a
// message goes back to.
func bookkeeping(name string) bool {
	n := strings.ToLower(name)
	return n == "x-death" || strings.HasPrefix(n, "x-first-death-") || strings.HasPrefix(n, "x-last-death-") ||
		n == letter.HeaderReplayID || n == letter.HeaderReplayCount || n == strings.ToLower(letter.HeaderReplayedFrom)
}

// RedactBody returns body with the values the policy hides replaced (those
// at json_paths; with show_json_paths every leaf value not under one of
// them), and the values it hid. ok is false when body cannot be redacted
// (it is not JSON and json_paths or show_json_paths are set): show
// nothing of it then. It implements engine.Redactor.
func (p *Policy) RedactBody(_ string, body []byte) (out []byte, hidden []string, ok bool) {
	if p == nil {
		return body, nil, true
	}
	out, hidden, err := redact.JSONShow(body, p.Redaction.ShowJSONPaths, p.Redaction.JSONPaths)
	if err != nil {
		return nil, nil, false
	}
	return out, hidden, true
}

// headerStrings lists the text of a header value (nested tables and
// arrays included).
func headerStrings(v any) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return []string{x}
	case []byte:
		return []string{string(x)}
	case map[string]any:
		var out []string
		for _, c := range x {
			out = append(out, headerStrings(c)...)
		}
		return out
	case []any:
		var out []string
		for _, c := range x {
			out = append(out, headerStrings(c)...)
		}
		return out
	}
	return []string{fmt.Sprint(v)}
}

// ErrChannelNotAllowed is the refusal of a preview in a channel the
// policy does not allow for its DLQ.
var ErrChannelNotAllowed = errors.New("commands: channel not allowed for this DLQ")

// ChannelError is a refusal by a channel rule: previews of DLQ may be
// posted only in Allowed. It wraps ErrChannelNotAllowed.
type ChannelError struct {
	DLQ     string
	Channel string
	Allowed []string
}

func (e *ChannelError) Error() string {
	var chans []string
	for _, c := range e.Allowed {
		chans = append(chans, "`"+c+"`")
	}
	return fmt.Sprintf("Previews of `%s` may be posted only in the channel(s) %s, not here; nothing was read. Preview it there.", e.DLQ, strings.Join(chans, ", "))
}

func (e *ChannelError) Unwrap() error { return ErrChannelNotAllowed }

// CheckChannel checks that a preview of dlq may be posted in channel: every
// channel rule whose queues match dlq must allow channel. Without rules
// for dlq, any channel is allowed.
func (p *Policy) CheckChannel(dlq, channel string) error {
	if p == nil {
		return nil
	}
	for _, r := range p.Channels {
		if !matchesAny(r.Queues, dlq) {
			continue
		}
		allowed := false
		for _, c := range r.Allow {
			allowed = allowed || c == channel
		}
		if !allowed {
			return &ChannelError{DLQ: dlq, Channel: channel, Allowed: r.Allow}
		}
	}
	return nil
}

func matchesAny(patterns []string, name string) bool {
	for _, q := range patterns {
		if matchGlob(q, name) {
			return true
		}
	}
	return false
}
