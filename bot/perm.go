package bot

import (
	"context"
	"errors"
	"fmt"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// userMessage words an operation's refusal or failure for the person who
// asked, in Slack's idiom: what went wrong, and that nothing changed
// where that matters.
func userMessage(err error, subject string) string {
	if r, ok := ops.IsRefusal(err); ok {
		if r.Subject != "" {
			subject = r.Subject
		}
		switch r.Code {
		case ops.QueueNotFound:
			return fmt.Sprintf("There is no queue `%s` on the broker; check the name (and vhost).", blocks.EscapeKeepCode(subject))
		case ops.TokenUsed:
			if errors.Is(err, engine.ErrTokenUsed) && r.Reason == "That preview was already approved: a token starts at most one replay. Nothing more was sent." {
				return "That preview was already approved: a token starts at most one replay, and its replay is in the preview's thread. Nothing more was sent."
			}
		case ops.ReplayNotFound:
			return fmt.Sprintf("There is no replay `%s`; `list` shows recent replays.", blocks.EscapeKeepCode(subject))
		case ops.ReadBudget:
			var rbe *engine.ReadBudgetError
			if errors.As(err, &rbe) {
				return "Not done, to keep the broker from dropping messages: " + blocks.EscapeKeepCode(rbe.Error()) + "."
			}
		}
		return r.Reason
	}
	switch {
	case errors.Is(err, engine.ErrBrokerUnavailable):
		return "RabbitMQ cannot be reached right now, so nothing was done. Try again shortly."
	case errors.Is(err, engine.ErrStoreUnavailable):
		return "dlqbot's Redis cannot be reached right now, so nothing was done. Try again shortly."
	case errors.Is(err, engine.ErrBadSignature):
		return "Refused: dlqbot's record of this in Redis failed its signature check (it was changed outside dlqbot), so nothing was done or sent. The operators have been alerted in dlqbot's log."
	case errors.Is(err, context.DeadlineExceeded):
		return "That took too long and was abandoned; nothing was changed. Try again, perhaps with a narrower selection."
	}
	return "That did not work: " + err.Error()
}
