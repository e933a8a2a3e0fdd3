package blocks

import (
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// The helpers below are the ones the bot uses for its own one-line
// messages, so that a user, a queue name or a replay reads the same in a
// bot reply as in a rendered block.

// Who renders a requester or approver: a Slack user id becomes a mention,
// anything else (a terminal user, say) escaped text; "unknown" when empty.
func Who(user string) string { return who(user) }

// EscapeKeepCode escapes &, < and > so text cannot mention, link or notify,
// and keeps backticks (use it on text the bot formats itself).
func EscapeKeepCode(s string) string {
	var b []byte
	for _, r := range s {
		b = append(b, entity(r)...)
	}
	return string(b)
}

// ReplayLine describes a replay in one line of the `list` reply: id, DLQ,
// state, progress, approver and how long ago it was created (as of now).
func ReplayLine(r engine.Replay, now time.Time) string {
	if r.Unverifiable {
		return fmt.Sprintf("• `%s` · *unverifiable*: its record in Redis failed its check (changed outside dlqbot, or written without the signing key)", r.ID)
	}
	s := fmt.Sprintf("• `%s` · `%s` · *%s* · %d of %d sent, %d came back", r.ID, escape(r.DLQ), r.State, r.Sent, r.Total, r.Returned)
	if r.Approver != "" {
		s += " · approved by " + who(r.Approver)
	}
	if !r.CreatedAt.IsZero() {
		s += " · " + ago(now.Sub(r.CreatedAt))
	}
	return s
}
