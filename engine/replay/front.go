package replay

import (
	"context"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// What the front ends ask of the engine (ops.Engine), answered by package
// review: the previews, approvals, checks, parking and control of a
// replay's state come before and after its runs.

// Preview scans sel.DLQ without changing it, works out what a replay would
// do and, when anything is replayable, freezes it under a new token
// (review.Service.Preview).
func (s *Service) Preview(ctx context.Context, sel engine.Selection, requester string) (*engine.Preview, error) {
	return s.rev.Preview(ctx, sel, requester)
}

// Compare reports what changed since the token's preview, changing nothing
// (review.Service.Compare).
func (s *Service) Compare(ctx context.Context, token string) (engine.Frozen, []engine.Change, error) {
	return s.rev.Compare(ctx, token)
}

// ApproveConfirmed turns a preview token into a queued replay, bound to
// what the approver was shown: digest is the ChangesDigest of the changes
// they confirmed ("" when none), via the front end the approval came
// through (review.Service.ApproveConfirmed).
func (s *Service) ApproveConfirmed(ctx context.Context, token, approver, via string, p engine.Params, digest string) (engine.Approval, error) {
	return s.rev.ApproveConfirmed(ctx, token, approver, via, p, digest)
}

// Control performs action a on replay id for by: pause, resume, resume
// resending the copies in doubt, or cancel (review.Service.Control).
func (s *Service) Control(ctx context.Context, id string, a engine.ControlAction, by string) (engine.Replay, error) {
	return s.rev.Control(ctx, id, a, by)
}

// Enqueue hands replay id to the workers through Deps.Jobs
// (review.Service.Enqueue).
func (s *Service) Enqueue(ctx context.Context, id string) error {
	return s.rev.Enqueue(ctx, id)
}

// Status returns a replay's record (review.Service.Status).
func (s *Service) Status(ctx context.Context, id string) (engine.Replay, error) {
	return s.rev.Status(ctx, id)
}

// Check reports how many of the copies replay replayID sent came back, and
// what else reached its DLQ since it started; label names a scheduled
// follow-up, "" for an on-demand check (review.Service.Check).
func (s *Service) Check(ctx context.Context, replayID, label string) (engine.CheckReport, error) {
	return s.rev.Check(ctx, replayID, label)
}

// Park moves the replay's returned copies at or over the park limit from
// the DLQ to its parking queue (review.Service.Park).
func (s *Service) Park(ctx context.Context, replayID, by string) (engine.ParkResult, error) {
	return s.rev.Park(ctx, replayID, by)
}

// Reap reports, every interval until ctx ends, the running replays whose
// owner's lease lapsed as interrupted (review.Service.Reap). Every process
// runs it beside its workers.
func (s *Service) Reap(ctx context.Context, every time.Duration) {
	s.rev.Reap(ctx, every)
}

// FollowUps runs the follow-up checks as they fall due until ctx ends,
// polling every interval (review.Service.FollowUps). Every process runs it.
func (s *Service) FollowUps(ctx context.Context, every time.Duration) {
	s.rev.FollowUps(ctx, every)
}

// DropKept gives back the read replay id's approval kept for a run here,
// if any: the replay is handed to workers instead, which may run in
// another process (review.Service.DropKept).
func (s *Service) DropKept(id string) { s.rev.DropKept(id) }
