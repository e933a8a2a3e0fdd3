package commands

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"
)

var (
	userIDPattern  = regexp.MustCompile(`^[UW][A-Z0-9_-]+$`)
	groupIDPattern = regexp.MustCompile(`^S[A-Z0-9_-]+$`)
)

// LoadPolicy reads the permissions file at path. An empty path means
// there is no file: access control is off, and LoadPolicy returns nil, nil.
// Errors name the line and the field at fault.
func LoadPolicy(path string) (*Policy, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("commands: load policy %s: %w", path, err)
	}
	p, err := parsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("commands: load policy %s: %w", path, err)
	}
	return p, nil
}

// ParsePolicy parses and validates a permissions file's contents: unknown
// keys, unknown actions, roles without a name or members, bad globs and
// malformed Slack ids are errors naming the line.
func ParsePolicy(data []byte) (*Policy, error) {
	p, err := parsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("commands: parse policy: %w", err)
	}
	return p, nil
}

func parsePolicy(data []byte) (*Policy, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, errors.New("the file is empty; list at least one role, or unset DLQBOT_PERMISSIONS to turn access control off")
	}
	p := &Policy{}
	roleNodes := map[string]*yaml.Node{}
	err := fields(doc.Content[0], "the top level", []string{"roles", "approval", "principals", "redaction", "channels", "watch"}, func(key string, v *yaml.Node) error {
		switch key {
		case "watch":
			return parseWatch(v, p)
		case "redaction":
			return parseRedaction(v, &p.Redaction)
		case "channels":
			return parseChannels(v, p)
		case "approval":
			return parseApproval(v, &p.Approval)
		case "principals":
			return parsePrincipals(v, p)
		}
		return each(v, "roles", func(n *yaml.Node) error {
			r, err := parseRole(n)
			if err != nil {
				return err
			}
			if slices.ContainsFunc(p.Roles, func(o Role) bool { return o.Name == r.Name }) {
				return errAt(n, "role %q is defined twice", r.Name)
			}
			roleNodes[r.Name] = n
			p.Roles = append(p.Roles, r)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if len(p.Roles) == 0 {
		return nil, errAt(doc.Content[0], "no roles are defined, so nobody could do anything; list at least one under roles:")
	}
	if err := checkRolePrincipals(p, roleNodes); err != nil {
		return nil, err
	}
	return p, nil
}

func parseRole(n *yaml.Node) (Role, error) {
	var r Role
	err := fields(n, "a role", []string{"name", "users", "usergroups", "principals", "grants"}, func(key string, v *yaml.Node) error {
		var err error
		switch key {
		case "name":
			r.Name, err = scalar(v, "name")
		case "users":
			r.Users, err = idList(v, "user", userIDPattern, "a Slack member id (like U012ABCDEF; in Slack, open the profile and choose Copy member ID)")
		case "usergroups":
			r.UserGroups, err = idList(v, "usergroup", groupIDPattern, "a Slack user group id (like S0123ABCD), not its @handle")
		case "principals":
			r.Principals, err = idList(v, "principal", principalNamePattern, "a principal name (lower-case letters, digits, . _ -)")
		case "grants":
			err = each(v, "grants", func(g *yaml.Node) error {
				grant, err := parseGrant(g)
				r.Grants = append(r.Grants, grant)
				return err
			})
		}
		return err
	})
	switch {
	case err != nil:
		return r, err
	case strings.TrimSpace(r.Name) == "":
		return r, errAt(n, "a role has no name; give each role a name:")
	case len(r.Users) == 0 && len(r.UserGroups) == 0 && len(r.Principals) == 0:
		return r, errAt(n, "role %q lists no users, usergroups or principals, so it grants nothing to anyone", r.Name)
	case len(r.Grants) == 0:
		return r, errAt(n, "role %q has no grants", r.Name)
	}
	return r, nil
}

func parseGrant(n *yaml.Node) (Grant, error) {
	var g Grant
	err := fields(n, "a grant", []string{"queues", "actions"}, func(key string, v *yaml.Node) error {
		if key == "queues" {
			return each(v, "queues", func(q *yaml.Node) error {
				s, err := scalar(q, "a queue pattern")
				if err == nil {
					err = checkGlob(q, s)
				}
				g.Queues = append(g.Queues, s)
				return err
			})
		}
		return each(v, "actions", func(a *yaml.Node) error {
			s, err := scalar(a, "an action")
			if err != nil {
				return err
			}
			act := Action(strings.ToLower(s))
			if !slices.Contains(Actions, act) {
				msg := fmt.Sprintf("unknown action %q; the actions are read, replay and publish", s)
				if sug := suggest(string(act), []string{"read", "replay", "publish"}); sug != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", sug)
				}
				return errAt(a, "%s", msg)
			}
			g.Actions = append(g.Actions, act)
			return nil
		})
	})
	switch {
	case err != nil:
		return g, err
	case len(g.Queues) == 0:
		return g, errAt(n, "a grant has no queues:")
	case len(g.Actions) == 0:
		return g, errAt(n, "a grant has no actions:")
	}
	return g, nil
}

func parseApproval(n *yaml.Node, a *Approval) error {
	return fields(n, "approval", []string{"require_distinct_approver", "window", "when_unchanged"}, func(key string, v *yaml.Node) error {
		if key == "when_unchanged" {
			w := WhenUnchanged(v.Value)
			if v.Kind != yaml.ScalarNode || (w != WhenUnchangedWarn && w != WhenUnchangedSecondPerson && w != WhenUnchangedRefuse) {
				return errAt(v, "when_unchanged must be warn, second_person or refuse, not %q", v.Value)
			}
			a.WhenUnchanged = w
			return nil
		}
		if key == "window" {
			d, err := time.ParseDuration(v.Value)
			if v.Kind != yaml.ScalarNode || err != nil || d < time.Minute {
				return errAt(v, "window must be a duration of a minute or more (like 24h), not %q", v.Value)
			}
			a.Window = d
			return nil
		}
		if v.Kind == yaml.ScalarNode {
			if b, err := strconv.ParseBool(v.Value); err == nil && v.Tag == "!!bool" {
				a.DistinctApprover = b
				return nil
			}
			if k, err := strconv.Atoi(v.Value); err == nil && v.Tag == "!!int" && k >= 0 {
				a.DistinctApprover, a.Above = true, k
				return nil
			}
		}
		return errAt(v, "require_distinct_approver must be true, false or a number of messages (0 or more), not %q", v.Value)
	})
}

// checkGlob rejects patterns that cannot mean what their author expects.
func checkGlob(n *yaml.Node, s string) error {
	if s == "" {
		return errAt(n, "a queue pattern is empty")
	}
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '\\':
			if i+1 == len(rs) {
				return errAt(n, "queue pattern %q ends with a lone \\", s)
			}
			i++
		case strings.ContainsRune("[]{}", r):
			return errAt(n, "queue pattern %q uses %q; only * and ? are wildcards (list each pattern, or escape it with \\)", s, r)
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return errAt(n, "queue pattern %q contains white space or a control character", s)
		}
	}
	return nil
}

// fields walks the mapping n, refusing duplicate and unknown keys.
func fields(n *yaml.Node, where string, known []string, fn func(key string, v *yaml.Node) error) error {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		return errAt(n, "%s must be a mapping with keys %s", where, strings.Join(known, ", "))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if !slices.Contains(known, k.Value) {
			msg := fmt.Sprintf("unknown key %q in %s", k.Value, where)
			if s := suggest(k.Value, known); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else {
				msg += " (known: " + strings.Join(known, ", ") + ")"
			}
			return errAt(k, "%s", msg)
		}
		if seen[k.Value] {
			return errAt(k, "key %q appears twice in %s", k.Value, where)
		}
		seen[k.Value] = true
		if err := fn(k.Value, v); err != nil {
			return err
		}
	}
	return nil
}

// each calls fn for every item of the sequence n; a single scalar counts
// as a list of one, and null as an empty list.
func each(n *yaml.Node, what string, fn func(*yaml.Node) error) error {
	n = deref(n)
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		return nil
	case n.Kind == yaml.ScalarNode:
		return fn(n)
	case n.Kind != yaml.SequenceNode:
		return errAt(n, "%s must be a list", what)
	}
	for _, item := range n.Content {
		if err := fn(deref(item)); err != nil {
			return err
		}
	}
	return nil
}

func scalar(n *yaml.Node, what string) (string, error) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", errAt(n, "%s must be a single value", what)
	}
	return n.Value, nil
}

func idList(n *yaml.Node, what string, pattern *regexp.Regexp, expect string) ([]string, error) {
	var out []string
	err := each(n, what+"s", func(item *yaml.Node) error {
		s, err := scalar(item, "a "+what)
		if err != nil {
			return err
		}
		if !pattern.MatchString(s) {
			return errAt(item, "%s %q is not %s", what, s, expect)
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func errAt(n *yaml.Node, format string, a ...any) error {
	return fmt.Errorf("line %d: %s", n.Line, fmt.Sprintf(format, a...))
}
