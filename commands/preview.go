package commands

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stroma/dlqbot/engine"
)

// preview parses "preview <dlq> [filters] [to=<queue>]". The DLQ may stand
// anywhere among the filters; canonical output puts it first.
func (p *parser) preview(args []token) Result {
	var sel engine.Selection
	for i, t := range args {
		if t.eq {
			continue
		}
		if sel.DLQ != "" {
			return p.extraPreviewWord(args, i, sel.DLQ)
		}
		if strings.Contains(t.value, "=") {
			return p.failTry(fmt.Sprintf("The DLQ name `%s` contains `=`, which would read as a filter", t.raw), "preview orders.dlq")
		}
		if msg := checkQueue("The DLQ name", t.value); msg != "" {
			return p.failTry(msg, "preview orders.dlq")
		}
		sel.DLQ = t.value
	}
	if sel.DLQ == "" {
		return p.failTry("preview needs the dead-letter queue's name first", "preview orders.dlq reason=rejected")
	}
	try := func(key string) string { return "preview " + sel.DLQ + " " + examples[key] }
	args, r := p.headerTerms(args, &sel)
	if r.Reply != "" {
		return r
	}
	seen, bad := p.keyValues(args, "preview", sel.DLQ, previewKeys, try, func(t token) (msg, example string) {
		switch t.key {
		case "ids":
			sel.IDs, msg = parseIDs(t.value)
		case "reason":
			sel.Reason, msg = parseReason(t.value)
			if msg != "" && reasonSuggestion(t.value) != "" {
				example = "preview " + sel.DLQ + " reason=" + reasonSuggestion(t.value)
			}
		case "source":
			sel.Source, msg = t.value, checkQueue("The source queue", t.value)
		case "since":
			sel.Since, msg = parseWhen(t.key, t.value, p.now)
		case "until":
			sel.Until, msg = parseWhen(t.key, t.value, p.now)
		case "exception":
			sel.Exception = t.value
		case "limit":
			sel.Limit, msg = parseCount(t.key, t.value)
		case "park_after":
			sel.ParkAfter, msg = parseCount(t.key, t.value)
		case "include_parked":
			sel.IncludeParked, msg = parseBool(t.key, t.value)
		case "vhost":
			sel.Vhost, msg = t.value, checkQueue("The vhost", t.value)
		case "to":
			sel.To, msg = t.value, checkQueue("The target queue", t.value)
		case "group":
			sel.Group = t.value
			if utf8.RuneCountInString(t.value) > 200 {
				msg = "A failure group is at most 200 characters long; use the group's id a preview lists (g and 12 hex digits)"
			}
		case "replayed_by":
			sel.ReplayedBy, msg = t.value, checkOpaque("replay id", t.value)
		}
		return msg, example
	})
	if bad != nil {
		return *bad
	}
	if msg := crossCheck(sel, seen, p.now); msg != "" {
		return p.failTry(msg, "preview "+sel.DLQ+" since=2h")
	}
	if sel.To == sel.DLQ && sel.To != "" {
		return p.failTry(fmt.Sprintf("`to=%s` is the DLQ itself; replaying a DLQ into itself only moves its messages to the back", sel.To), "preview "+sel.DLQ+" to=orders.scratch")
	}
	return ok(PreviewCmd{Selection: sel})
}

// headerPrefix starts a header term: header.<name>=<value>.
const headerPrefix = "header."

// headerTerms takes the header.<name>=<value> terms out of args into
// sel.Headers. The name is kept as typed (AMQP header names are
// case-sensitive); the value is matched exactly.
func (p *parser) headerTerms(args []token, sel *engine.Selection) ([]token, Result) {
	var rest []token
	for _, t := range args {
		if !t.eq || !strings.HasPrefix(t.key, headerPrefix) {
			rest = append(rest, t)
			continue
		}
		name := t.raw[len(headerPrefix):]
		if i := strings.IndexByte(name, '='); i >= 0 {
			name = name[:i]
		}
		example := "preview " + sel.DLQ + " " + examples["header"]
		switch {
		case name == "":
			return nil, p.failTry(fmt.Sprintf("`%s` names no header; write header.<name>=<value>", t.raw), example)
		case utf8.RuneCountInString(name) > 255:
			return nil, p.failTry("A header name is at most 255 characters long", example)
		case t.value == "":
			return nil, p.failTry(fmt.Sprintf("`%s` needs a value: the header's exact value", t.raw), example)
		}
		if _, dup := sel.Headers[name]; dup {
			return nil, p.failTry(fmt.Sprintf("The header `%s` is given twice; give it once", name), example)
		}
		if sel.Headers == nil {
			sel.Headers = map[string]string{}
		}
		sel.Headers[name] = t.value
	}
	return rest, Result{}
}

// crossCheck applies the rules between since, until and now.
func crossCheck(sel engine.Selection, seen map[string]token, now time.Time) string {
	switch {
	case !sel.Since.IsZero() && !sel.Until.IsZero() && sel.Since.After(sel.Until):
		return fmt.Sprintf("`%s` (%s) is after `%s` (%s), so nothing could match; swap them",
			seen["since"].raw, sel.Since.Format(time.RFC3339), seen["until"].raw, sel.Until.Format(time.RFC3339))
	case !sel.Since.IsZero() && sel.Since.After(now):
		return fmt.Sprintf("`%s` is in the future (%s), so nothing could match; a duration such as since=2h means two hours ago",
			seen["since"].raw, sel.Since.Format(time.RFC3339))
	}
	return ""
}

// extraPreviewWord explains a second positional word in a preview.
func (p *parser) extraPreviewWord(args []token, i int, dlq string) Result {
	t := args[i]
	if i > 0 {
		prev := args[i-1]
		if prev.eq && prev.key == "exception" && prev.raw == prev.key+"="+prev.value {
			return p.failTry(fmt.Sprintf("Unexpected `%s` after `%s`; if the value has spaces, quote it", t.raw, prev.raw),
				fmt.Sprintf("preview %s %s=%q", dlq, prev.key, prev.value+" "+t.value))
		}
	}
	return p.failTry(fmt.Sprintf("preview takes one DLQ, but `%s` follows `%s`; filters are written key=value, and each DLQ is previewed separately", t.raw, dlq),
		"preview "+dlq+" reason=rejected")
}

// replay parses "replay <token> [step= cap= rate= timeout= takeover=yes]".
func (p *parser) replay(args []token) Result {
	var c ReplayCmd
	for _, t := range args {
		if t.eq {
			continue
		}
		if c.Token != "" {
			return p.failTry(fmt.Sprintf("replay takes one preview token, but `%s` follows `%s`", t.raw, c.Token), "replay "+c.Token+" step=5")
		}
		if msg := checkOpaque("preview token", t.value); msg != "" {
			if strings.Contains(msg, "queue name") {
				return p.failTry(msg+"; preview it first, then replay the token the preview shows", "preview "+t.value)
			}
			return p.failTry(msg+"; use the token shown under the preview", "replay <token>")
		}
		c.Token = t.value
	}
	if c.Token == "" {
		return p.failTry("replay needs the token shown under a preview (run preview first)", "replay <token> step=5")
	}
	try := func(key string) string { return "replay " + c.Token + " " + examples[key] }
	_, bad := p.keyValues(args, "replay", c.Token, replayKeys, try, func(t token) (msg, example string) {
		switch t.key {
		case "step":
			c.Params.Step, msg = parseCount(t.key, t.value)
		case "cap":
			c.Params.Cap, msg = parseCount(t.key, t.value)
		case "rate":
			c.Params.Rate, c.Params.Auto, msg = parseRateAuto(t.value)
		case "max":
			c.Params.Max, msg = parseMax(t.value)
		case "timeout":
			c.Params.Timeout, msg = parseTimeout(t.value)
		case "takeover":
			c.Params.TakeOver, msg = parseTakeOver(t.value)
		}
		return msg, ""
	})
	if bad != nil {
		return *bad
	}
	if msg, fix := checkParams(c.Params); msg != "" {
		return p.failTry(msg, "replay "+c.Token+" "+fix)
	}
	return ok(c)
}

// keyValues checks the key=value arguments of verb — each key allowed,
// none repeated, each with a value — and hands each to set, which stores
// it and returns a problem sentence ("" when fine) and, optionally, a
// better example than try(key). subject follows verb in examples. It
// returns the arguments by key, or the reply to the first mistake.
func (p *parser) keyValues(args []token, verb, subject string, allowed []string, try func(key string) string,
	set func(t token) (msg, example string)) (map[string]token, *Result) {
	seen := map[string]token{}
	for _, t := range args {
		if !t.eq {
			continue
		}
		if !slices.Contains(allowed, t.key) {
			r := p.badKey(t, verb, allowed, verb+" "+subject+" <example>")
			return nil, &r
		}
		if prev, dup := seen[t.key]; dup {
			r := p.sameKey(prev, t, try(t.key))
			return nil, &r
		}
		seen[t.key] = t
		if t.value == "" {
			r := p.failTry(fmt.Sprintf("`%s=` needs a value", t.key), try(t.key))
			return nil, &r
		}
		if msg, example := set(t); msg != "" {
			if example == "" {
				example = try(t.key)
			}
			r := p.failTry(msg, example)
			return nil, &r
		}
	}
	return seen, nil
}

// ParseSelection reads a selection written in the preview grammar
// ("orders.dlq reason=rejected since=2h to=orders.retry"), as the HTTP API
// and MCP take it, without the word preview: the selection, or the
// problem in a sentence.
func ParseSelection(text string, now time.Time) (engine.Selection, string) {
	p := &parser{prefix: DefaultPrefix, now: now}
	if strings.TrimSpace(text) == "" {
		return engine.Selection{}, "The selection is empty; name the DLQ first, as in \"orders.dlq reason=rejected since=2h\"."
	}
	if !utf8.ValidString(text) {
		return engine.Selection{}, "The selection is not valid UTF-8 text."
	}
	toks, msg := tokenize(text)
	if msg != "" {
		return engine.Selection{}, msg
	}
	res := p.preview(toks)
	if pc, ok := res.Cmd.(PreviewCmd); ok {
		return pc.Selection, ""
	}
	if res.Reply == "" {
		return engine.Selection{}, "The selection does not parse as a preview's selection."
	}
	return engine.Selection{}, res.Reply
}

// parseTakeOver reads takeover=yes (or no): whether the replay takes over
// the previewed messages another replay owns (engine.Params.TakeOver).
func parseTakeOver(v string) (bool, string) {
	switch strings.ToLower(v) {
	case "yes", "true":
		return true, ""
	case "no", "false":
		return false, ""
	}
	return false, fmt.Sprintf("`takeover=` is `yes` (send the previewed messages another replay owns from this one; that replay then leaves them) or `no`, not `%s`", v)
}
