package bot

import (
	"context"
	"errors"
	"fmt"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// permit runs check with user's Slack user groups (looked up only when the
// policy names any). A refusal is returned as is; when the groups could
// not be read, the refusal says so.
func (b *Bot) permit(ctx context.Context, user string, check func(groups []string) error) error {
	p := b.cfg.Policy
	if p == nil {
		return nil
	}
	var groups []string
	var lookupErr error
	if len(p.Groups()) > 0 {
		groups, lookupErr = b.groups.GroupsOf(ctx, user)
		if lookupErr != nil {
			b.log.Warn().Err(lookupErr).Str("user", user).Msg("user groups lookup failed")
		}
	}
	err := check(groups)
	if err != nil && lookupErr != nil {
		return fmt.Errorf("%w (your Slack user groups could not be read just now, so only grants to you by name counted)", err)
	}
	return err
}

// userMessage words an error for the person who asked: what went wrong,
// and that nothing changed where that matters.
func userMessage(err error, subject string) string {
	var fe *commands.ForbiddenError
	switch {
	case errors.As(err, &fe):
		return err.Error()
	case errors.Is(err, engine.ErrQueueNotFound):
		return fmt.Sprintf("There is no queue `%s` on the broker; check the name (and vhost).", blocks.EscapeKeepCode(subject))
	case errors.Is(err, engine.ErrTokenNotFound):
		return "That preview token is unknown or has expired (tokens last 24 hours): preview again to get a new one. Nothing was sent."
	case errors.Is(err, engine.ErrTokenUsed):
		return "That preview was already approved: a token starts at most one replay, and its replay is in the preview's thread. Nothing more was sent."
	case errors.Is(err, engine.ErrReplayNotFound):
		return fmt.Sprintf("There is no replay `%s`; `list` shows recent replays.", blocks.EscapeKeepCode(subject))
	case errors.Is(err, engine.ErrReadBudget):
		var rbe *engine.ReadBudgetError
		if errors.As(err, &rbe) {
			return "Not done, to keep the broker from dropping messages: " + blocks.EscapeKeepCode(rbe.Error()) + "."
		}
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
