package commands

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/stroma/dlqbot/redact"
)

// Redaction is what the policy hides of every message before anything
// leaves the process (Slack, the API, MCP, the terminal, logs):
//
//	redaction:
//	  excerpt_bytes: 120               # default: the engine's (200); 0: no payload excerpt at all
//	  headers: [x-card, x-customer]    # these headers' values are never shown
//	  json_paths: [$.card.number, $.customer.email, "$.items[*].iban"]
//
// A header's value is hidden wherever it would show (an exception message
// read from it included); a JSON path's value is replaced in the payload
// excerpt, and hidden in exception text too. A body that is not JSON shows
// no excerpt when json_paths are set.
type Redaction struct {
	// ExcerptBytes is the longest payload excerpt; nil leaves the
	// engine's default, 0 shows none.
	ExcerptBytes *int
	Headers      []string
	JSONPaths    []redact.Path
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
	return fields(n, "redaction", []string{"excerpt_bytes", "headers", "json_paths"}, func(key string, v *yaml.Node) error {
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
			return each(v, "headers", func(h *yaml.Node) error {
				s, err := scalar(h, "a header name")
				if err == nil && strings.TrimSpace(s) == "" {
					err = errAt(h, "a header name is empty")
				}
				r.Headers = append(r.Headers, strings.TrimSpace(s))
				return err
			})
		}
		return each(v, "json_paths", func(j *yaml.Node) error {
			s, err := scalar(j, "a JSON path")
			if err != nil {
				return err
			}
			p, err := redact.ParsePath(s)
			if err != nil {
				return errAt(j, "%v (write paths like $.card.number or $.items[*].email)", err)
			}
			r.JSONPaths = append(r.JSONPaths, p)
			return nil
		})
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
// redaction names (matched without regard to case), nested values
// included; the caller hides them wherever they would show. It
// implements engine.Redactor.
func (p *Policy) HiddenHeaders(_ string, headers map[string]any) []string {
	if p == nil {
		return nil
	}
	var hidden []string
	for _, h := range p.Redaction.Headers {
		for k, v := range headers {
			if strings.EqualFold(k, h) {
				hidden = append(hidden, headerStrings(v)...)
			}
		}
	}
	return hidden
}

// RedactBody returns body with the values at the policy's JSON paths
// hidden, and the values it hid. ok is false when body cannot be redacted
// (it is not JSON and json_paths are set): show nothing of it then. It
// implements engine.Redactor.
func (p *Policy) RedactBody(_ string, body []byte) (out []byte, hidden []string, ok bool) {
	if p == nil {
		return body, nil, true
	}
	out, hidden, err := redact.JSON(body, p.Redaction.JSONPaths)
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
