package commands

import "strings"

// NamedQueues lists the queues the policy's grants of action name
// literally (patterns without * or ?, their escapes removed), each once:
// what a list of DLQs adds to the queues that look like dead-letter
// queues. A nil Policy names none.
func (p *Policy) NamedQueues(action Action) []string {
	if p == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, r := range p.Roles {
		for _, g := range r.Grants {
			if !hasAction(g.Actions, action) {
				continue
			}
			for _, q := range g.Queues {
				name, literal := literalPattern(q)
				if literal && name != "" && !seen[name] {
					seen[name] = true
					out = append(out, name)
				}
			}
		}
	}
	return out
}

func hasAction(as []Action, a Action) bool {
	for _, x := range as {
		if x == a {
			return true
		}
	}
	return false
}

// literalPattern is pattern's one name when it has no unescaped * or ?.
func literalPattern(pattern string) (string, bool) {
	var b strings.Builder
	escaped := false
	for _, r := range pattern {
		switch {
		case escaped:
			b.WriteRune(r)
			escaped = false
		case r == '\\':
			escaped = true
		case r == '*' || r == '?':
			return "", false
		default:
			b.WriteRune(r)
		}
	}
	return b.String(), true
}
