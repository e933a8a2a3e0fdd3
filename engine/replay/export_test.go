package replay

import (
	"context"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
)

// What the tests reach that the front ends do not: functions, not methods,
// so that Service's methods stay the front ends' and the background
// parts'.

// Approve is review.Service.Approve: confirmed approves despite whatever
// the compare finds, shown to nobody.
func Approve(s *Service, ctx context.Context, token, approver string, p engine.Params, confirmed bool) (engine.Approval, error) {
	return s.rev.Approve(ctx, token, approver, p, confirmed)
}

// RunDue claims and runs the follow-ups due now (review.Service.RunDue).
func RunDue(s *Service, ctx context.Context) int { return s.rev.RunDue(ctx) }

// DrainTaps records every registered tap into the store every poll until
// ctx ends, as each worker does.
func DrainTaps(s *Service, ctx context.Context, poll time.Duration) { s.drainTaps(ctx, poll) }

// ParseMeta derives a message's metadata with the configured in-house
// dialect (review.Base.ParseMeta).
func ParseMeta(s *Service, dlq string, m letter.Message) letter.Meta { return s.base.ParseMeta(dlq, m) }
