package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Authorizer decides whether a worker may run a replay, by the policy the
// worker's own process loaded: whoever approved it (and, on a resume,
// whoever asked to resume it) must hold what approving needs, and the
// approval must satisfy the four-eyes rule and "needs a human". A replay
// approved by a process that applied no such policy (or another one) is
// so refused before anything is sent. WorkerConfig.Authorizer; ops
// implements it.
type Authorizer interface {
	// AuthorizeRun returns nil when r may run now; resumedBy is who asked
	// for the run when it resumes a paused or stopped replay ("" for the
	// first run of an approved one). Its error is a sentence saying why
	// not.
	AuthorizeRun(ctx context.Context, r Replay, resumedBy string) error
}

// ErrRunRefused means a worker refused to run a replay because its
// approval (or its resume) does not satisfy the worker's policy; the
// replay was left stopped, nothing sent.
var ErrRunRefused = errors.New("run refused by the worker's policy")

// authorize asks authz whether r may run, before anything is sent. When it
// may not (or the answer could not be had), the replay is left stopped
// with the reason in its note, announced as a stopped event, and
// ErrRunRefused is returned: nothing was sent. A resume asks again.
func (s *Service) authorize(ctx context.Context, authz Authorizer, r Replay, owner string, epoch int64) (Replay, error) {
	by := ""
	if r.State != StateQueued {
		_, who, err := s.d.Replays.Desired(ctx, r.ID)
		if err != nil {
			return r, fmt.Errorf("engine: run %s: desired state: %w", r.ID, err)
		}
		by = who
	}
	aerr := authz.AuthorizeRun(ctx, r, by)
	if aerr == nil {
		return r, nil
	}
	s.cfg.Log.Error().Str("replay_id", r.ID).Str("dlq", r.DLQ).Str("approver", r.Approver).Str("resumed_by", by).Err(aerr).
		Msg("replay refused by this worker's policy: nothing was sent")
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	now := s.d.Clock.Now()
	r.State, r.EndedAt, r.UpdatedAt = StateStopped, now, now
	r.Note = "refused by the worker's permissions policy, nothing was sent: " + aerr.Error()
	err := s.d.Replays.Yield(wctx, r, owner, epoch, StateStopped, StateCancelled)
	if errors.Is(err, ErrDesireChanged) {
		// Cancelled meanwhile: it ends cancelled, still with nothing sent.
		_, who, _ := s.d.Replays.Desired(wctx, r.ID)
		r.State, r.Note = StateCancelled, "cancelled by "+orOperator(who)+"; "+r.Note
		err = s.d.Replays.Put(wctx, r, owner, epoch)
	}
	if err != nil {
		s.warn(r.ID, r.DLQ, "record a refused run", err)
		return r, fmt.Errorf("engine: run %s: %w, and its record could not be written: %w", r.ID, ErrRunRefused, err)
	}
	if s.d.Notifier != nil {
		kind := EventStopped
		if r.State == StateCancelled {
			kind = EventCancelled
		}
		s.d.Notifier.Notify(wctx, Event{Kind: kind, Replay: r, At: now, Text: r.Note})
	}
	return r, fmt.Errorf("engine: run %s: %w: %w", r.ID, ErrRunRefused, aerr)
}
