package commands

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"regexp"
	"strings"
)

// PrincipalPrefix starts the identity of an API principal that is not
// mapped to a Slack user: "api:<name>". Requesters and approvers are
// recorded by identity, so a principal and a Slack user never compare
// equal unless the principal is mapped to that user (Principal.User).
const PrincipalPrefix = "api:"

// principalNamePattern is what a principal's name may look like.
var principalNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Principal is a named client of the HTTP API and the MCP endpoint. It
// authenticates with a bearer token; the permissions file holds only the
// token's SHA-256 hash.
type Principal struct {
	// Name is the principal's name in the permissions file.
	Name string
	// TokenSHA256 is the SHA-256 hash of its bearer token.
	TokenSHA256 [32]byte
	// User, when set, is the Slack user id the principal acts as: it has
	// exactly that user's roles and counts as that user for the
	// distinct-approver rule (a personal token). Otherwise the principal
	// has the roles that list it under principals.
	User string
	// Emails are the identities a trusted proxy in front of the dashboard
	// may name for this principal (X-Forwarded-Email), lower-case.
	Emails []string
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
		if subtle.ConstantTimeCompare(h[:], p.Principals[i].TokenSHA256[:]) == 1 {
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
