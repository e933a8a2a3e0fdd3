package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// Preview previews selection, written in the grammar of `/dlq preview`
// ("orders.dlq reason=rejected since=2h to=orders.retry"); see
// ops.Preview. A preview that selected nothing has no token.
func (s *Service) Preview(ctx context.Context, c Caller, selection string) (*engine.Preview, error) {
	sel, msg := commands.ParseSelection(selection, time.Now())
	if msg != "" {
		return nil, newError(http.StatusBadRequest, CodeBadSelection, "%s", msg)
	}
	p, err := s.ops.Preview(ctx, c, sel)
	if err != nil {
		return nil, asError(err, sel.DLQ)
	}
	if p.Token != "" {
		s.previews.Put(p.Token, p)
	}
	return p, nil
}

// Params are a replay's tunables as a program gives them; absent values
// mean the defaults. They are checked as typed values with the slash
// command's rules (commands.CheckReplayParams): step and cap are at least
// 1, as api/openapi.yaml says.
type Params struct {
	Step *int `json:"step,omitempty"`
	Cap  *int `json:"cap,omitempty"`
	// Rate is messages per second, "max" for unpaced, or "auto" (the
	// default) to pace to the target's consumers.
	Rate Rate `json:"rate,omitempty"`
	// Max is the most rate "auto" sends, in messages per second.
	Max Rate `json:"max,omitempty"`
	// Timeout is a step's settle timeout in Go syntax ("30s").
	Timeout string `json:"timeout,omitempty"`
	// TakeOver, at approval, sends the previewed messages another running
	// or paused replay owns from this replay (engine.Params.TakeOver).
	TakeOver bool `json:"take_over,omitempty"`
}

func (p Params) params() (engine.Params, error) {
	prm, msg := commands.CheckReplayParams(commands.ReplayParams{Step: p.Step, Cap: p.Cap, Rate: string(p.Rate), Max: string(p.Max), Timeout: p.Timeout})
	if msg != "" {
		return engine.Params{}, newError(http.StatusBadRequest, CodeBadRequest, "%s. Nothing was sent.", msg)
	}
	prm.TakeOver = p.TakeOver
	return prm, nil
}

// ChangesDigest names a list of changes (ops.ChangesDigest).
func ChangesDigest(changes []engine.Change) string { return ops.ChangesDigest(changes) }

// Approve approves the preview token (ops.Approve): when anything changed
// since the preview it refuses with CodeChanged, the changes and their
// digest, and nothing is sent; calling again with confirm set to that
// digest approves despite exactly those changes. On success the replay
// is shown in Slack (when wired) and handed to the workers.
func (s *Service) Approve(ctx context.Context, c Caller, token string, p Params, confirm string) (engine.Replay, error) {
	params, err := p.params()
	if err != nil {
		return engine.Replay{}, err
	}
	a := ops.Approval{Token: token, Params: params, ConfirmDigest: confirm}
	if s.d.Slack != nil {
		a.Show = func(ctx context.Context, r engine.Replay) {
			if err := s.d.Slack.ShowReplay(ctx, r); err != nil {
				s.log.Warn().Err(err).Str("replay_id", r.ID).Msg("replay could not be shown in Slack")
			}
		}
	}
	out, err := s.ops.Approve(ctx, c, a)
	if err != nil {
		return engine.Replay{}, asError(err, out.Frozen.DLQ)
	}
	if out.HandOffErr != nil {
		r := out.Replay
		id := engine.NewID("req_")
		return r, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, err: out.HandOffErr, RequestID: id,
			Message: fmt.Sprintf("Replay %s was approved but could not be handed to a worker. Nothing was sent: cancel it and approve a new preview. (The operators can find why in dlqbot's log under request id %s.)", r.ID, id)}
	}
	return out.Replay, nil
}

// RequestApproval posts the preview token's preview to Slack for a person
// to approve, instead of approving it (ops.RequestApproval).
func (s *Service) RequestApproval(ctx context.Context, c Caller, token string) (channel, ts string, err error) {
	p, _ := s.previews.Get(token)
	channel, ts, err = s.ops.RequestApproval(ctx, c, token, p)
	if err != nil {
		if errors.Is(err, ops.ErrAskFailed) {
			return "", "", &Error{Status: http.StatusBadGateway, Code: CodeUnavailable, err: err,
				Message: "The preview could not be posted to Slack for approval just now. Nothing was sent; try again shortly."}
		}
		return "", "", asError(err, token)
	}
	return channel, ts, nil
}

// Replay returns one replay (ops.Replay).
func (s *Service) Replay(ctx context.Context, c Caller, id string) (engine.Replay, error) {
	r, err := s.ops.Replay(ctx, c, id)
	if err != nil {
		return r, asError(err, id)
	}
	return r, nil
}

// List returns the n most recent replays the caller may see and how many
// others were hidden (ops.List).
func (s *Service) List(ctx context.Context, c Caller, n int) ([]engine.Replay, int, error) {
	rs, hidden, err := s.ops.List(ctx, c, n)
	if err != nil {
		return nil, 0, asError(err, "")
	}
	return rs, hidden, nil
}

// ListDLQs returns the dead-letter queues the caller may read
// (ops.ListDLQs).
func (s *Service) ListDLQs(ctx context.Context, c Caller) (ops.DLQs, error) {
	d, err := s.ops.ListDLQs(ctx, c)
	if err != nil {
		return d, asError(err, "")
	}
	return d, nil
}

// Control pauses, resumes or cancels (verb) a replay (ops.Control).
func (s *Service) Control(ctx context.Context, c Caller, verb, id string) (engine.Replay, error) {
	action, ok := engine.ParseControlAction(verb)
	if !ok {
		return engine.Replay{}, newError(http.StatusBadRequest, CodeBadRequest, "Unknown action %q; a replay can be paused, resumed or cancelled.", verb)
	}
	r, err := s.ops.Control(ctx, c, action, id)
	if err != nil {
		return engine.Replay{}, asError(err, id)
	}
	return r, nil
}

// Check reports whether a replay's messages came back (ops.Check).
func (s *Service) Check(ctx context.Context, c Caller, id string) (engine.CheckReport, error) {
	rep, err := s.ops.Check(ctx, c, id)
	if err != nil {
		return rep, asError(err, id)
	}
	return rep, nil
}

// Park moves a replay's returned copies at the park limit to the DLQ's
// parking queue (ops.Park).
func (s *Service) Park(ctx context.Context, c Caller, id string) (engine.ParkResult, error) {
	res, err := s.ops.Park(ctx, c, id)
	if err != nil {
		e := asError(err, id)
		if _, refused := ops.IsRefusal(err); !refused {
			e.Message += fmt.Sprintf(" (%d moved before it failed; the rest stay in the DLQ)", res.Parked)
		}
		return res, e
	}
	return res, nil
}
