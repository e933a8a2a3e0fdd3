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
	// FrontWatch is the DLQ watch's own entries (alerts and
	// resolutions), made by no caller.
	FrontWatch = "watch"
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
	// mode), "" otherwise. It is a label for the audit trail, logs and a
	// replay's ApprovedVia only, recorded as the front end: the program
	// could say anything, so no decision depends on it.
	Client string
	// Channel is the chat channel the call comes from and its outcome is
	// shown in (a Slack channel id), "" when there is none. The policy's
	// per-DLQ channel allowlists are checked against it.
	Channel string
	// Auth is how the caller proved who it is (one of the Auth
	// constants). The zero value counts as a bearer token, the strictest
	// case for "needs a human": only the constructors below vouch for
	// anything else.
	Auth string
}

// How a Caller proved who it is.
const (
	// AuthToken: a principal's bearer token (the HTTP API, MCP over HTTP,
	// the dashboard's token sign-in, a terminal or MCP client of the
	// server).
	AuthToken = "token"
	// AuthSlack: Slack's signed request naming a workspace member.
	AuthSlack = "slack"
	// AuthOS: the OS account running the terminal on the operator's own
	// credentials (direct mode).
	AuthOS = "os"
	// AuthProxy: a trusted proxy in front of the dashboard naming a
	// person's e-mail (single sign-on).
	AuthProxy = "proxy"
)

// SlackCaller is Slack user user (a member id) clicking or typing.
func SlackCaller(user string) Caller {
	return Caller{Identity: user, FrontEnd: FrontSlack, Auth: AuthSlack}
}

// InChannel returns c calling from chat channel channel.
func (c Caller) InChannel(channel string) Caller {
	c.Channel = channel
	return c
}

// PrincipalCaller is principal p, authenticated by its bearer token,
// calling through front end fe (FrontAPI, FrontMCP, FrontDashboard, or
// FrontTerminal for a terminal that is a client of the server).
func PrincipalCaller(p commands.Principal, fe string) Caller {
	return Caller{Identity: p.ID(), Principal: p.Name, FrontEnd: fe, Auth: AuthToken}
}

// ProxyCaller is principal p signed in to the dashboard by a trusted
// proxy's identity header (a person's e-mail), not by a token.
func ProxyCaller(p commands.Principal) Caller {
	return Caller{Identity: p.ID(), Principal: p.Name, FrontEnd: FrontDashboard, Auth: AuthProxy}
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
	c := Caller{Identity: id, FrontEnd: FrontTerminal, Auth: AuthOS}
	if pr, ok := policy.PrincipalOfOS(osUser); ok {
		c.Principal = pr.Name
	}
	return c
}

// frontEnd names the front end c came through for the audit trail and a
// replay's ApprovedVia: the program that made an HTTP API call for its
// user (Client) when it said so, else FrontEnd.
func (c Caller) frontEnd() string {
	if c.Client != "" {
		return c.Client
	}
	return c.FrontEnd
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

// NeedsHuman reports whether c may not change a replay's state itself,
// so that a front end can ask a person instead (MCP's dlq_replay).
func (o *Ops) NeedsHuman(c Caller) bool { return o.needsHuman(c) }

// needsHuman reports whether c may not approve, resume, cancel or park
// itself (pausing stays open: it is a brake). It is a property of the
// caller, the same whichever front end it comes through:
//
//   - a principal marked needs_human never passes, and neither does the
//     Slack user such a principal acts as (its as_user);
//   - with Config.RequireHuman (DLQBOT_MCP_REQUIRE_HUMAN), the program
//     front ends (the HTTP API, MCP) never pass, and a caller that
//     proved itself with a bearer token passes only when its principal
//     names a person (as_user) and it comes through the dashboard or a
//     terminal client. An automation principal (no as_user) never
//     passes, whatever front end it names: the front end a client
//     declares grants nothing a personal token could not do anyway.
//
// Slack members, the terminal on the operator's own credentials and
// people a trusted proxy signs in to the dashboard pass RequireHuman.
func (o *Ops) needsHuman(c Caller) bool {
	pr, found := o.principalOf(c)
	if found && pr.NeedsHuman {
		return true
	}
	if o.policy != nil && c.Principal == "" && c.Auth == AuthSlack {
		for _, p := range o.policy.Principals {
			if p.NeedsHuman && p.User != "" && p.User == c.Identity {
				return true
			}
		}
	}
	if !o.cfg.RequireHuman {
		return false
	}
	// A terminal talking to the server's API says so (Client); with a
	// bearer token that only exempts a principal that names a person.
	if c.FrontEnd == FrontAPI && c.Client == FrontTerminal && c.Auth == AuthToken {
		c.FrontEnd = FrontTerminal
	}
	if c.FrontEnd != FrontSlack && c.FrontEnd != FrontTerminal && c.FrontEnd != FrontDashboard {
		return true // the HTTP API, MCP, and any front end not named here
	}
	switch c.Auth {
	case AuthSlack:
		return c.FrontEnd != FrontSlack
	case AuthOS:
		return c.FrontEnd != FrontTerminal
	case AuthProxy:
		return c.FrontEnd != FrontDashboard
	}
	// A bearer token (or a caller that did not say how it proved itself).
	if !found || pr.User == "" {
		return true
	}
	return c.FrontEnd != FrontDashboard && c.FrontEnd != FrontTerminal
}

// principalOf returns the policy's principal c authenticated as.
func (o *Ops) principalOf(c Caller) (commands.Principal, bool) {
	if o.policy == nil || c.Principal == "" {
		return commands.Principal{}, false
	}
	for _, p := range o.policy.Principals {
		if p.Name == c.Principal {
			return p, true
		}
	}
	return commands.Principal{}, false
}
