package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// Preview previews selection, written in the grammar of `/dlq preview`
// ("orders.dlq reason=rejected since=2h to=orders.retry"). It needs `read`
// on the DLQ and changes nothing. A preview that selected nothing has no
// token (Token is "").
func (s *Service) Preview(ctx context.Context, c Caller, selection string) (*engine.Preview, error) {
	if strings.TrimSpace(selection) == "" {
		return nil, newError(http.StatusBadRequest, CodeBadSelection, "The selection is empty; name the DLQ first, as in \"orders.dlq reason=rejected since=2h\".")
	}
	res := commands.Parse("preview "+selection, s.d.Now())
	pc, ok := res.Cmd.(commands.PreviewCmd)
	if !ok {
		msg := res.Reply
		if msg == "" {
			msg = "The selection does not parse as a preview's selection."
		}
		return nil, newError(http.StatusBadRequest, CodeBadSelection, "%s", msg)
	}
	sel := pc.Selection
	if err := s.permit(ctx, c, func(g []string) error { return s.cfg.Policy.CheckPreview(c.ID, g, sel.DLQ) }); err != nil {
		return nil, asError(err, sel.DLQ)
	}
	p, err := s.d.Engine.Preview(ctx, sel, c.ID)
	if err != nil {
		return nil, asError(err, sel.DLQ)
	}
	if p.Token != "" {
		s.previews.put(p.Token, p)
	}
	return p, nil
}

// Params are a replay's tunables as a program gives them; zero values mean
// the defaults. They are checked with the slash command's rules.
type Params struct {
	Step int `json:"step,omitempty"`
	Cap  int `json:"cap,omitempty"`
	// Rate is messages per second, or "max" for unpaced.
	Rate Rate `json:"rate,omitempty"`
	// Timeout is a step's settle timeout in Go syntax ("30s").
	Timeout string `json:"timeout,omitempty"`
}

// params checks p with the `replay` grammar and returns the engine's
// parameters.
func (p Params) params(token string) (engine.Params, error) {
	parts := []string{"replay", token}
	if p.Step != 0 {
		parts = append(parts, "step="+strconv.Itoa(p.Step))
	}
	if p.Cap != 0 {
		parts = append(parts, "cap="+strconv.Itoa(p.Cap))
	}
	if p.Rate != "" {
		parts = append(parts, "rate="+string(p.Rate))
	}
	if p.Timeout != "" {
		parts = append(parts, "timeout="+p.Timeout)
	}
	for _, w := range parts[1:] {
		if strings.ContainsAny(w, " \t\r\n\"'") {
			return engine.Params{}, newError(http.StatusBadRequest, CodeBadRequest, "The preview token and parameters cannot contain spaces or quotes.")
		}
	}
	res := commands.Parse(strings.Join(parts, " "), time.Now())
	rc, ok := res.Cmd.(commands.ReplayCmd)
	if !ok {
		return engine.Params{}, newError(http.StatusBadRequest, CodeBadRequest, "%s", res.Reply)
	}
	return rc.Params, nil
}

// ChangesDigest names a list of changes: an approval confirms the changes
// it was shown by quoting their digest.
func ChangesDigest(changes []engine.Change) string {
	h := sha256.New()
	for _, c := range changes {
		fmt.Fprintf(h, "%s\x00%s\x00%d\n", c.Kind, c.Queue, c.Messages)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Approve approves the preview token: `replay` on the DLQ and `publish` on
// every target, and the four-eyes rule against the preview's requester.
// Like the Approve button it compares the world with the preview first:
// when anything changed it refuses with CodeChanged, the changes and their
// digest, and nothing is sent; calling again with confirm set to that
// digest approves despite exactly those changes. On success the replay is
// shown in Slack (when wired) and handed to the workers.
func (s *Service) Approve(ctx context.Context, c Caller, token string, p Params, confirm string) (engine.Replay, error) {
	if strings.TrimSpace(token) == "" {
		return engine.Replay{}, newError(http.StatusBadRequest, CodeBadRequest, "A replay needs the token of a preview; preview first.")
	}
	params, err := p.params(token)
	if err != nil {
		return engine.Replay{}, err
	}
	f, err := s.d.Tokens.Load(ctx, token)
	if err != nil {
		return engine.Replay{}, asError(err, token)
	}
	if err := s.permit(ctx, c, func(g []string) error {
		return s.cfg.Policy.CheckApprove(c.ID, g, f.DLQ, f.TargetQueues(), f.Requester, f.Total)
	}); err != nil {
		return engine.Replay{}, asError(err, f.DLQ)
	}
	confirmed := false
	if confirm != "" {
		_, changes, err := s.d.Engine.Compare(ctx, token)
		if err != nil {
			return engine.Replay{}, asError(err, f.DLQ)
		}
		if len(changes) > 0 && ChangesDigest(changes) != confirm {
			return engine.Replay{}, changedError(changes, true)
		}
		confirmed = len(changes) > 0
	}
	ap, err := s.d.Engine.Approve(ctx, token, c.ID, params, confirmed)
	if errors.Is(err, engine.ErrChanged) {
		return engine.Replay{}, changedError(ap.Changes, false)
	}
	if err != nil {
		return engine.Replay{}, asError(err, f.DLQ)
	}
	r := ap.Replay
	log := s.log.With().Str("replay_id", r.ID).Str("principal", c.Principal).Str("approver", c.ID).Str("via", c.Via).Logger()
	if s.d.Slack != nil {
		if err := s.d.Slack.ShowReplay(ctx, r); err != nil {
			log.Warn().Err(err).Msg("replay could not be shown in Slack")
		}
	}
	if err := s.d.Engine.Enqueue(ctx, r.ID); err != nil {
		log.Error().Err(err).Msg("replay approved but not handed to a worker")
		return r, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, err: err,
			Message: fmt.Sprintf("Replay %s was approved but could not be handed to a worker (%v). Nothing was sent: cancel it and approve a new preview.", r.ID, err)}
	}
	log.Info().Str("dlq", r.DLQ).Int("total", r.Total).Msg("replay approved and queued")
	if cur, err := s.d.Engine.Status(ctx, r.ID); err == nil {
		r = cur
	}
	return r, nil
}

func changedError(changes []engine.Change, again bool) *Error {
	msg := "The DLQ or its targets changed since the preview, so nothing was sent."
	if again {
		msg = "What changed since the preview is not what this approval confirmed, so nothing was sent."
	}
	var lines []string
	for _, ch := range changes {
		lines = append(lines, ch.Detail)
	}
	msg += " Changes: " + strings.Join(lines, "; ") + ". To approve anyway, approve again with confirm_changes set to changes_digest; or preview again."
	return &Error{Status: http.StatusConflict, Code: CodeChanged, Message: msg, Changes: changes, ChangesDigest: ChangesDigest(changes)}
}

// RequestApproval posts the preview token's preview to Slack for a person
// to approve, instead of approving it: the MCP tools' human-approval mode.
// The caller needs `read` on the DLQ (it could preview it); the person who
// clicks Approve needs what approving needs.
func (s *Service) RequestApproval(ctx context.Context, c Caller, token string) (channel, ts string, err error) {
	if s.d.Slack == nil {
		return "", "", newError(http.StatusServiceUnavailable, CodeUnavailable, "Approval by a person is required, but no Slack front end is configured to ask one. Nothing was sent.")
	}
	f, err := s.d.Tokens.Load(ctx, token)
	if err != nil {
		return "", "", asError(err, token)
	}
	if err := s.permit(ctx, c, func(g []string) error {
		return s.cfg.Policy.CheckRead(c.ID, g, f.DLQ, "to ask for this replay")
	}); err != nil {
		return "", "", asError(err, f.DLQ)
	}
	p, _ := s.previews.get(token)
	channel, ts, err = s.d.Slack.RequestApproval(ctx, f, p)
	if err != nil {
		return "", "", &Error{Status: http.StatusBadGateway, Code: CodeUnavailable, err: err,
			Message: "The preview could not be posted to Slack for approval (" + err.Error() + "). Nothing was sent."}
	}
	s.log.Info().Str("token", audit.TokenRef(token)).Str("principal", c.Principal).Str("via", c.Via).Str("channel", channel).Msg("approval by a person requested in Slack")
	return channel, ts, nil
}

// Replay returns one replay; the caller needs `read` on its DLQ.
func (s *Service) Replay(ctx context.Context, c Caller, id string) (engine.Replay, error) {
	r, err := s.d.Engine.Status(ctx, id)
	if err != nil {
		return r, asError(err, id)
	}
	if err := s.permit(ctx, c, func(g []string) error {
		return s.cfg.Policy.CheckRead(c.ID, g, r.DLQ, "to see this replay")
	}); err != nil {
		return engine.Replay{}, asError(err, r.DLQ)
	}
	return r, nil
}

// List returns the n most recent replays the caller may see (`read` on
// their DLQ), newest first, and how many others were hidden.
func (s *Service) List(ctx context.Context, c Caller, n int) ([]engine.Replay, int, error) {
	if n <= 0 {
		n = DefaultListSize
	}
	if n > DefaultMaxList {
		return nil, 0, newError(http.StatusBadRequest, CodeBadRequest, "At most %d replays can be listed at once.", DefaultMaxList)
	}
	rs, err := s.d.Replays.List(ctx, n)
	if err != nil {
		return nil, 0, asError(err, "")
	}
	out := []engine.Replay{}
	hidden := 0
	err = s.permit(ctx, c, func(g []string) error {
		for _, r := range rs {
			if s.cfg.Policy.Allowed(c.ID, g, commands.ActionRead, r.DLQ) {
				out = append(out, r)
			} else {
				hidden++
			}
		}
		return nil
	})
	return out, hidden, err
}

// Control pauses, resumes or cancels (verb) a replay, with the Slack
// buttons' permissions: `read` on the DLQ pulls the brake (pause, cancel),
// resume needs what approving needs. It returns the replay as it is after
// the request (the owner acts within a second).
func (s *Service) Control(ctx context.Context, c Caller, verb, id string) (engine.Replay, error) {
	action, ok := engine.ParseControlAction(verb)
	if !ok {
		return engine.Replay{}, newError(http.StatusBadRequest, CodeBadRequest, "Unknown action %q; a replay can be paused, resumed or cancelled.", verb)
	}
	r, err := s.d.Engine.Status(ctx, id)
	if err != nil {
		return r, asError(err, id)
	}
	var targets []string
	if f, err := s.d.Tokens.Load(ctx, r.Token); err == nil {
		targets = f.TargetQueues()
	} else if action == engine.ControlResume {
		return engine.Replay{}, newError(http.StatusConflict, CodeNotControllable, "Replay %s cannot be resumed: its preview can no longer be read (%v).", id, err)
	}
	if err := s.permit(ctx, c, func(g []string) error {
		return s.cfg.Policy.CheckControl(c.ID, g, verb, r.DLQ, targets)
	}); err != nil {
		return engine.Replay{}, asError(err, r.DLQ)
	}
	_, err = s.d.Engine.Control(ctx, id, action, c.ID)
	if errors.Is(err, engine.ErrNotControllable) {
		return engine.Replay{}, newError(http.StatusConflict, CodeNotControllable, "Replay %s is %s, so it cannot be %s; nothing was changed.", id, r.State, action.Done())
	}
	if err != nil {
		return engine.Replay{}, asError(err, id)
	}
	s.log.Info().Str("replay_id", id).Str("principal", c.Principal).Str("by", c.ID).Str("via", c.Via).Str("verb", verb).Msg("control requested")
	if cur, err := s.d.Engine.Status(ctx, id); err == nil {
		r = cur
	}
	return r, nil
}

// Check reports whether a replay's messages came back; it reads the
// DLQ without changing it and needs `read` on it.
func (s *Service) Check(ctx context.Context, c Caller, id string) (engine.CheckReport, error) {
	if _, err := s.Replay(ctx, c, id); err != nil {
		return engine.CheckReport{}, err
	}
	rep, err := s.d.Engine.Check(ctx, id, "")
	if err != nil {
		return rep, asError(err, id)
	}
	return rep, nil
}

// Park moves a replay's returned copies at the park limit to the DLQ's
// parking queue: `replay` on the DLQ and `publish` on the parking queue.
func (s *Service) Park(ctx context.Context, c Caller, id string) (engine.ParkResult, error) {
	r, err := s.d.Engine.Status(ctx, id)
	if err != nil {
		return engine.ParkResult{}, asError(err, id)
	}
	if err := s.permit(ctx, c, func(g []string) error {
		return s.cfg.Policy.CheckPark(c.ID, g, r.DLQ, engine.ParkingQueue(r.DLQ))
	}); err != nil {
		return engine.ParkResult{}, asError(err, r.DLQ)
	}
	res, err := s.d.Engine.Park(ctx, id, c.ID)
	if err != nil {
		e := asError(err, r.DLQ)
		e.Message += fmt.Sprintf(" (%d moved before it failed; the rest stay in the DLQ)", res.Parked)
		return res, e
	}
	s.log.Info().Str("replay_id", id).Str("principal", c.Principal).Str("via", c.Via).Int("parked", res.Parked).Msg("parked")
	return res, nil
}
