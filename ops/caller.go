package ops

import (
	"strings"

	"github.com/stroma/dlqbot/commands"
)

// Front ends a Caller comes through.
const (
	FrontSlack     = "slack"
	FrontTerminal  = "terminal"
	FrontAPI       = "api"
	FrontMCP       = "mcp"
	FrontDashboard = "dashboard"
)

// Caller is who makes a call, and through which front end.
type Caller struct {
	// Identity is who the front end says is calling: a Slack user id
	// (U…), "api:<name>" for a principal that is not mapped to a Slack
	// user, or the principal's Slack user id when it is, "terminal:<os
	// user>", "mcp:<os user>". The policy resolves it to the identity it
	// checks and records (commands.Policy.Person).
	Identity string
	// Principal is the policy's principal name, when the caller
	// authenticated as one ("" otherwise).
	Principal string
	// FrontEnd is one of the Front constants.
	FrontEnd string
	// Client names the program that made an HTTP API call for its user
	// (FrontTerminal, FrontMCP: the terminal or `dlqbot mcp` in client
	// mode), "" otherwise. It is a label for the audit trail and logs
	// only, recorded as the entry's front end: the program could say
	// anything, so no decision depends on it.
	Client string
	// Channel is the chat channel the call comes from and its outcome is
	// shown in (a Slack channel id), "" when there is none. The policy's
	// per-DLQ channel allowlists are checked against it.
	Channel string
}

// SlackCaller is Slack user user (a member id) clicking or typing.
func SlackCaller(user string) Caller {
	return Caller{Identity: user, FrontEnd: FrontSlack}
}

// InChannel returns c calling from chat channel channel.
func (c Caller) InChannel(channel string) Caller {
	c.Channel = channel
	return c
}

// PrincipalCaller is principal p, authenticated by its bearer token,
// calling through front end fe (FrontAPI, FrontMCP, FrontDashboard).
func PrincipalCaller(p commands.Principal, fe string) Caller {
	return Caller{Identity: p.ID(), Principal: p.Name, FrontEnd: fe}
}

// TerminalCaller is OS user osUser at the terminal. With a policy that
// names osUser under a principal's os_users the terminal acts as that
// principal; an OS user the policy does not name is refused every state
// change (and has no grants). Without a policy it is "terminal:<os user>"
// with access control off.
func TerminalCaller(policy *commands.Policy, osUser string) Caller {
	id := "terminal"
	if osUser != "" {
		id = commands.TerminalIdentityPrefix + osUser
	}
	c := Caller{Identity: id, FrontEnd: FrontTerminal}
	if pr, ok := policy.PrincipalOfOS(osUser); ok {
		c.Principal = pr.Name
	}
	return c
}

// acting returns the identity the policy checks and records for c.
func (o *Ops) acting(c Caller) string {
	return o.policy.Person(c.Identity)
}

// name is c's name in the audit trail: its principal's name, else the
// identity the policy checks.
func (o *Ops) name(c Caller) string {
	if c.Principal != "" {
		return c.Principal
	}
	return o.acting(c)
}

// unnamed reports whether c is a terminal (or stdio MCP) user the policy
// does not name: with a policy, such a caller may change nothing.
func (o *Ops) unnamed(c Caller) bool {
	if o.policy == nil {
		return false
	}
	return strings.HasPrefix(o.acting(c), commands.TerminalIdentityPrefix) || o.acting(c) == "terminal" ||
		strings.HasPrefix(o.acting(c), "mcp:") || o.acting(c) == "mcp"
}

// slackUser returns the Slack user id whose user groups count for c, or
// "" when c is not a Slack user.
func (o *Ops) slackUser(c Caller) string {
	id := o.acting(c)
	for _, p := range []string{commands.PrincipalPrefix, commands.TerminalIdentityPrefix, "mcp:"} {
		if strings.HasPrefix(id, p) {
			return ""
		}
	}
	if id == "terminal" || id == "mcp" {
		return ""
	}
	return id
}

// NeedsHuman reports whether c may not start or resume a replay itself,
// so that a front end can ask a person instead (MCP's dlq_replay).
func (o *Ops) NeedsHuman(c Caller) bool { return o.needsHuman(c) }

// needsHuman reports whether c may not start or resume a replay itself:
// its principal says needs_human, or Config.RequireHuman holds for every
// program front end (the HTTP API and MCP, one bearer token reaching
// both).
func (o *Ops) needsHuman(c Caller) bool {
	if o.cfg.RequireHuman && (c.FrontEnd == FrontAPI || c.FrontEnd == FrontMCP) {
		return true
	}
	if o.policy == nil || c.Principal == "" {
		return false
	}
	for _, p := range o.policy.Principals {
		if p.Name == c.Principal {
			return p.NeedsHuman
		}
	}
	return false
}
