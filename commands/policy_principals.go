package commands

import (
	"encoding/hex"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// parsePrincipals reads the principals: list of the permissions file:
//
//	principals:
//	  - name: runbook
//	    token_sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//	    as_user: U012ABCDEF   # optional
//	    os_users: [alice]     # optional: the terminal acts as it for these
//	    needs_human: true     # optional: it may not start a replay itself
//
// Names, hashes and OS users must be unique; a hash must be 64 hex
// characters (the token itself is never written in the file). A
// principal needs a token_sha256 or os_users.
func parsePrincipals(n *yaml.Node, p *Policy) error {
	return each(n, "principals", func(item *yaml.Node) error {
		var pr Principal
		var hashSet bool
		err := fields(item, "a principal", []string{"name", "token_sha256", "as_user", "os_users", "needs_human"}, func(key string, v *yaml.Node) error {
			switch key {
			case "os_users":
				users, err := idList(v, "os_user", osUserPattern, "an OS user name (letters, digits, . _ -)")
				pr.OSUsers = users
				return err
			case "needs_human":
				if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
					return errAt(v, "needs_human must be true or false, not %q", v.Value)
				}
				pr.NeedsHuman = v.Value == "true"
				return nil
			}
			s, err := scalar(v, key)
			if err != nil {
				return err
			}
			switch key {
			case "name":
				if !principalNamePattern.MatchString(s) {
					return errAt(v, "principal name %q must be lower-case letters, digits, dots, dashes or underscores (at most 64)", s)
				}
				pr.Name = s
			case "token_sha256":
				b, err := hex.DecodeString(strings.ToLower(s))
				if err != nil || len(b) != len(pr.TokenSHA256) {
					return errAt(v, "token_sha256 must be the 64 hex characters of the token's SHA-256 (printf %%s \"$TOKEN\" | sha256sum), never the token itself")
				}
				copy(pr.TokenSHA256[:], b)
				hashSet, pr.HasToken = true, true
			case "as_user":
				if !userIDPattern.MatchString(s) {
					return errAt(v, "as_user %q is not a Slack member id (like U012ABCDEF)", s)
				}
				pr.User = s
			}
			return nil
		})
		switch {
		case err != nil:
			return err
		case pr.Name == "":
			return errAt(item, "a principal has no name")
		case !hashSet && len(pr.OSUsers) == 0:
			return errAt(item, "principal %q has no token_sha256 (and no os_users), so nobody could act as it", pr.Name)
		case slices.ContainsFunc(p.Principals, func(o Principal) bool { return o.Name == pr.Name }):
			return errAt(item, "principal %q is defined twice", pr.Name)
		case slices.ContainsFunc(pr.OSUsers, func(u string) bool { _, dup := p.PrincipalOfOS(u); return dup }):
			return errAt(item, "principal %q names an OS user another principal names already; an OS user is one principal", pr.Name)
		case hashSet && slices.ContainsFunc(p.Principals, func(o Principal) bool { return o.HasToken && o.TokenSHA256 == pr.TokenSHA256 }):
			return errAt(item, "principal %q has the same token_sha256 as another principal; give each its own token", pr.Name)
		}
		p.Principals = append(p.Principals, pr)
		return nil
	})
}

// checkRolePrincipals checks that every principal a role names is defined
// and not mapped to a Slack user (a mapped principal has its user's roles,
// nothing else).
func checkRolePrincipals(p *Policy, roleNodes map[string]*yaml.Node) error {
	for _, r := range p.Roles {
		for _, name := range r.Principals {
			i := slices.IndexFunc(p.Principals, func(o Principal) bool { return o.Name == name })
			switch {
			case i < 0:
				return errAt(roleNodes[r.Name], "role %q names principal %q, which is not defined under principals:", r.Name, name)
			case p.Principals[i].User != "":
				return errAt(roleNodes[r.Name], "role %q names principal %q, which acts as Slack user %s and has exactly that user's roles; list the user instead",
					r.Name, name, p.Principals[i].User)
			}
		}
	}
	return nil
}
