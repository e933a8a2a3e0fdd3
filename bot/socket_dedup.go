package bot

import (
	"context"

	"github.com/rs/zerolog"
	"github.com/slack-go/slack/socketmode"
)

// Socket Mode requests carry no signature, and Slack delivers an envelope
// again when it saw no ack in time (retry_attempt > 0): the same payload,
// whose trigger_id is unique to the user's action, under its envelope id.
// A request is acted on once: socketFirst records its envelope id and its
// trigger id in the same store as signed HTTP requests (Deps.Seen, shared
// by every replica, for seenFor), and a request either of which was seen
// before is acked and dropped.

// socketFirst reports whether the Socket Mode request req (whose payload
// has trigger, "" when none) arrives for the first time. Without a store
// every request is first; err is set when the store cannot tell.
func (b *Bot) socketFirst(ctx context.Context, req *socketmode.Request, trigger string, log zerolog.Logger) (bool, error) {
	if b.d.Seen == nil {
		return true, nil
	}
	keys := []string{"socket-envelope:" + req.EnvelopeID}
	if trigger != "" {
		keys = append(keys, "socket-trigger:"+trigger)
	}
	first := true
	for _, k := range keys {
		ok, err := b.d.Seen.FirstSeen(ctx, k, seenFor)
		if err != nil {
			log.Warn().Err(err).Msg("socket mode request dropped: cannot check whether it was received before")
			return false, err
		}
		first = first && ok
	}
	if !first {
		log.Warn().Int("retry_attempt", req.RetryAttempt).Str("retry_reason", req.RetryReason).Str("envelope", req.EnvelopeID).
			Msg("socket mode request dropped: the same request was received before; it is acted on once")
	}
	return first, nil
}
