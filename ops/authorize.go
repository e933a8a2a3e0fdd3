package ops

import (
	"context"
	"fmt"
	"strings"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

var _ engine.Authorizer = (*Ops)(nil)

// AuthorizeRun is the worker's own check before it sends anything
// (engine.Authorizer): the replay's approver, as recorded, must be named
// by this policy, hold `replay` on the DLQ and `publish` on every target,
// not need a human, and not be its requester unless the four-eyes rule
// lets the requester approve a replay of that size; on a resume the
// resumer must be named, hold the same grants and not need a human. So a
// replay approved by a process that applied no policy (or another one)
// and written into the same Redis is refused. The self-approval window
// is counted where the approval happens and not again here. Without a
// policy everything may run, except what Config.RequireHuman refuses
// (recordNeedsHuman).
func (o *Ops) AuthorizeRun(ctx context.Context, r engine.Replay, resumedBy string) error {
	if o.policy == nil {
		if why := o.recordNeedsHuman(r.Approver, r.ApprovedVia); why != "" {
			return fmt.Errorf("its approver, %s, %s; this worker requires a person to approve replays (DLQBOT_MCP_REQUIRE_HUMAN)", r.Approver, why)
		}
		if why := o.recordNeedsHuman(resumedBy, ""); resumedBy != "" && why != "" {
			return fmt.Errorf("whoever resumed it, %s, %s; this worker requires a person to resume replays (DLQBOT_MCP_REQUIRE_HUMAN)", resumedBy, why)
		}
		return nil
	}
	if r.Approver == "" {
		return fmt.Errorf("its record names no approver")
	}
	f, err := o.d.Tokens.LoadHeader(ctx, r.Token)
	if err != nil {
		return fmt.Errorf("its preview could not be read to check the approval (%w)", err)
	}
	targets := f.TargetQueues()
	if err := o.runner(ctx, "its approver", r.Approver, r.ApprovedVia, func(id string, g []string) error {
		return o.policy.CheckApprove(id, g, r.DLQ, targets)
	}); err != nil {
		return err
	}
	p := o.policy
	if p.Approval.DistinctApprover && p.Person(f.Requester) == p.Person(r.Approver) {
		if p.Approval.Above <= 0 {
			return fmt.Errorf("%s approved their own preview, and the permissions file requires someone else to approve", r.Approver)
		}
		if f.Total > p.Approval.Above {
			return fmt.Errorf("%s approved their own preview of %d messages, and the permissions file requires someone else to approve more than %d", r.Approver, f.Total, p.Approval.Above)
		}
	}
	if resumedBy == "" {
		return nil
	}
	return o.runner(ctx, "whoever resumed it", resumedBy, "", func(id string, g []string) error {
		return o.policy.CheckControl(id, g, string(engine.ControlResume), r.DLQ, targets)
	})
}

// runner checks identity (as recorded in a replay: the identity the
// policy checks) as who (its role in the replay) for a run: named by the
// policy, granted what check asks, and not needing a human. via is the
// front end the record says the approval came through ("" for a resume,
// whose record names only who).
func (o *Ops) runner(ctx context.Context, who, identity, via string, check func(id string, groups []string) error) error {
	c := Caller{Identity: identity, Auth: AuthSlack}
	if o.unnamed(c) {
		return fmt.Errorf("%s, %s, is not named by the permissions file (DLQBOT_PERMISSIONS), so it may change nothing", who, identity)
	}
	if err := o.permit(ctx, c, check); err != nil {
		reason := err.Error()
		reason = strings.Replace(reason, "You need ", identity+" needs ", 1)
		reason = strings.Replace(reason, "; you are in no role", "; they are in no role", 1)
		return fmt.Errorf("%s lacks a grant: %s", who, strings.TrimSuffix(reason, "."))
	}
	if o.identityNeedsHuman(identity) {
		return fmt.Errorf("%s, %s, needs a human (needs_human in the permissions file)", who, identity)
	}
	if why := o.recordNeedsHuman(identity, via); why != "" {
		return fmt.Errorf("%s, %s, %s; this worker requires a person (DLQBOT_MCP_REQUIRE_HUMAN)", who, identity, why)
	}
	return nil
}

// identityNeedsHuman reports whether the identity a replay records (an
// approver or a resumer) is a principal marked needs_human, or the Slack
// user one acts as.
func (o *Ops) identityNeedsHuman(identity string) bool {
	for _, pr := range o.policy.Principals {
		if pr.NeedsHuman && pr.ID() == identity {
			return true
		}
	}
	return false
}

// recordNeedsHuman says why, under Config.RequireHuman, identity may not
// make a replay send, or "" when it may. It is needsHuman's rule applied
// to what a replay's record tells: who (the identity the policy
// resolved) and, for an approval, the front end it came through (via,
// the record's ApprovedVia; "" when the record does not say, as for a
// resume). What a record does not tell, it does not hold against anyone:
//
//   - `dlqbot mcp` acting without a principal ("mcp", "mcp:<user>")
//     never passes;
//   - an approval through a front end other than Slack, the terminal and
//     the dashboard (the HTTP API, MCP) never passes, whoever made it;
//   - an automation principal (recorded as "api:<name>": no as_user)
//     passes only where needsHuman lets it, without its token: as one of
//     its os_users at the terminal, or signed in to the dashboard by the
//     trusted proxy (emails). One with only a token never passes, and a
//     record naming another front end than those it has is refused. A
//     record cannot tell a terminal client using the principal's token
//     from the operator's own terminal, so an automation principal with
//     os_users recorded through the terminal passes.
//
// A person (a Slack member, a principal's as_user) passes through Slack,
// the terminal and the dashboard, as in needsHuman.
func (o *Ops) recordNeedsHuman(identity, via string) string {
	if !o.cfg.RequireHuman {
		return ""
	}
	if isProgram(identity) {
		return "is a program"
	}
	switch via {
	case "", FrontSlack, FrontTerminal, FrontDashboard:
	default:
		return "approved through " + via + ", where no caller counts as a person"
	}
	name, ok := strings.CutPrefix(identity, commands.PrincipalPrefix)
	if !ok {
		return ""
	}
	var pr commands.Principal
	found := false
	if o.policy != nil {
		for _, p := range o.policy.Principals {
			if p.Name == name {
				pr, found = p, true
			}
		}
	}
	if !found || pr.User != "" {
		return "is no principal this worker's permissions file names"
	}
	if len(pr.OSUsers) > 0 && (via == "" || via == FrontTerminal) {
		return ""
	}
	if len(pr.Emails) > 0 && (via == "" || via == FrontDashboard) {
		return ""
	}
	if via == "" {
		return "is an automation principal (no as_user) that can only have used its token"
	}
	return "is an automation principal (no as_user) recorded as acting through " + via + ", where it has only its token"
}

// isProgram reports whether identity is that of `dlqbot mcp` acting
// without a principal ("mcp:<os user>").
func isProgram(identity string) bool {
	return identity == "mcp" || strings.HasPrefix(identity, "mcp:")
}
