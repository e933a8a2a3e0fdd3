package commands

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"
)

// PrincipalPrefix starts the identity of an API principal that is not
// mapped to a Slack user: "api:<name>". Requesters and approvers are
// recorded by identity, so a principal and a Slack user never compare
// equal unless the principal is mapped to that user (Principal.User).
const PrincipalPrefix = "api:"

// principalNamePattern is what a principal's name may look like.
var principalNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// TerminalIdentityPrefix starts the identity of a terminal user:
// "terminal:<os user>".
const TerminalIdentityPrefix = "terminal:"

// osUserPattern is what an OS user name in os_users may look like.
var osUserPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$`)

// Principal is a named caller: a client of the HTTP API and the MCP
// endpoint, which authenticates with a bearer token (the permissions file
// holds only the token's SHA-256 hash), and/or the terminal's OS users it
// names (OSUsers).
type Principal struct {
	// Name is the principal's name in the permissions file.
	Name string
	// TokenSHA256 is the SHA-256 hash of its bearer token, when HasToken.
	TokenSHA256 [32]byte
	// HasToken is set when the principal has a bearer token; a principal
	// with only OSUsers is reachable from the terminal alone.
	HasToken bool
	// OSUsers are the OS user names the terminal acts as this principal
	// for (os_users): `dlqbot replay` run by one of them is this
	// principal, for the grants and the four-eyes rule alike.
	OSUsers []string
	// NeedsHuman marks a principal that may not start a replay itself
	// (needs_human): approving or resuming as it is refused, and the MCP
	// tool asks a person in Slack instead.
	NeedsHuman bool
	// User, when set, is the Slack user id the principal acts as: it has
	// exactly that user's roles and counts as that user for the
	// distinct-approver rule (a personal token). Otherwise the principal
	// has the roles that list it under principals.
	User string
}

// ID is the identity the principal acts under, as recorded in previews and
// replays and checked by the policy: its Slack user id when it is mapped to
// one, else "api:<name>".
func (p Principal) ID() string {
	if p.User != "" {
		return p.User
	}
	return PrincipalPrefix + p.Name
}

// HashToken returns the lower-case hex SHA-256 of a bearer token, the form
// the permissions file stores (`printf %s "$TOKEN" | sha256sum`).
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// Principal returns the principal whose token is token. The token is
// hashed and compared with every principal's hash in constant time (no
// early exit), so the time taken says nothing about which hash was close.
// An empty token, a nil policy or no match returns false.
func (p *Policy) Principal(token string) (Principal, bool) {
	if p == nil || token == "" {
		return Principal{}, false
	}
	h := sha256.Sum256([]byte(token))
	found := -1
	for i := range p.Principals {
		if subtle.ConstantTimeCompare(h[:], p.Principals[i].TokenSHA256[:]) == 1 && p.Principals[i].HasToken {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, false
	}
	return p.Principals[found], true
}

// principalName returns the principal name in an "api:<name>" identity.
func principalName(user string) (string, bool) {
	return strings.CutPrefix(user, PrincipalPrefix)
}

// PrincipalOfOS returns the principal whose os_users names the OS user
// user; false when none does (or the policy is nil).
func (p *Policy) PrincipalOfOS(user string) (Principal, bool) {
	if p == nil || user == "" {
		return Principal{}, false
	}
	for _, pr := range p.Principals {
		if slices.Contains(pr.OSUsers, user) {
			return pr, true
		}
	}
	return Principal{}, false
}

// Person returns the identity that stands for whoever identity is, for the
// four-eyes rule: a terminal user named in a principal's os_users, and a
// principal mapped to a Slack user, are that principal's ID (its Slack
// user id when it has one); every other identity is itself. So a preview
// made as "terminal:alice" and an approval by Slack's U012ALICE compare
// equal when the policy maps alice to U012ALICE.
func (p *Policy) Person(identity string) string {
	if p == nil {
		return identity
	}
	if os, ok := strings.CutPrefix(identity, TerminalIdentityPrefix); ok {
		if pr, ok := p.PrincipalOfOS(os); ok {
			return pr.ID()
		}
		return identity
	}
	if name, ok := principalName(identity); ok {
		for _, pr := range p.Principals {
			if pr.Name == name {
				return pr.ID()
			}
		}
	}
	return identity
}
