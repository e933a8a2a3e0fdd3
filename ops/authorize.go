package ops

import (
	"context"
	"fmt"
	"strings"

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
// policy everything may run, except an approval by an MCP client under
// Config.RequireHuman.
func (o *Ops) AuthorizeRun(ctx context.Context, r engine.Replay, resumedBy string) error {
	if o.policy == nil {
		if o.cfg.RequireHuman && isProgram(r.Approver) {
			return fmt.Errorf("it was approved by %s, a program, and this worker requires a person to approve replays (DLQBOT_MCP_REQUIRE_HUMAN)", r.Approver)
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
	if err := o.runner(ctx, "its approver", r.Approver, func(id string, g []string) error {
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
	return o.runner(ctx, "whoever resumed it", resumedBy, func(id string, g []string) error {
		return o.policy.CheckControl(id, g, string(engine.ControlResume), r.DLQ, targets)
	})
}

// runner checks identity (as recorded in a replay: the identity the
// policy checks) as who (its role in the replay) for a run: named by the
// policy, granted what check asks, and not needing a human.
func (o *Ops) runner(ctx context.Context, who, identity string, check func(id string, groups []string) error) error {
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
	return nil
}

// identityNeedsHuman reports whether the identity a replay records (an
// approver or a resumer) is a principal marked needs_human, or the Slack
// user one acts as; under Config.RequireHuman an MCP client without a
// policy's principal needs one too.
func (o *Ops) identityNeedsHuman(identity string) bool {
	if o.cfg.RequireHuman && isProgram(identity) {
		return true
	}
	for _, pr := range o.policy.Principals {
		if pr.NeedsHuman && pr.ID() == identity {
			return true
		}
	}
	return false
}

// isProgram reports whether identity is that of `dlqbot mcp` acting
// without a principal ("mcp:<os user>").
func isProgram(identity string) bool {
	return identity == "mcp" || strings.HasPrefix(identity, "mcp:")
}
