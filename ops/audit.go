package ops

import (
	"context"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
)

// AuditVisible returns which audit entries c may see: those of the DLQs c
// may `read`, and c's own entries (compared as principals, like the
// four-eyes rule) that name no DLQ, such as a selection that did not
// parse. Without a policy every entry is visible. c's Slack user groups
// are read once, here; the returned function only decides. Reading the
// trail is not an operation and is not recorded.
func (o *Ops) AuditVisible(ctx context.Context, c Caller) func(audit.Entry) bool {
	if o.policy == nil {
		return func(audit.Entry) bool { return true }
	}
	visible := func(audit.Entry) bool { return false }
	_ = o.permit(ctx, c, func(uid string, g []string) error {
		visible = func(e audit.Entry) bool {
			if e.DLQ != "" {
				return o.policy.Allowed(uid, g, commands.ActionRead, e.DLQ)
			}
			return o.policy.Person(e.Identity) == uid
		}
		return nil
	})
	return visible
}
