package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

func needReplay(dlq string) commands.Need {
	return commands.Need{Action: commands.ActionReplay, Queues: []string{dlq}}
}

// Replay returns one replay; c needs `read` on its DLQ.
func (o *Ops) Replay(ctx context.Context, c Caller, id string) (engine.Replay, error) {
	r, err := o.d.Engine.Status(ctx, id)
	if err != nil {
		return r, Classify(err, id)
	}
	if err := o.permit(ctx, c, func(uid string, g []string) error {
		return o.policy.CheckRead(uid, g, r.DLQ, "to see this replay")
	}); err != nil {
		return engine.Replay{}, err
	}
	return r, nil
}

// List returns the n most recent replays c may see (`read` on their DLQ),
// newest first, and how many others were hidden. n <= 0 means
// DefaultListSize.
func (o *Ops) List(ctx context.Context, c Caller, n int) ([]engine.Replay, int, error) {
	if n <= 0 {
		n = DefaultListSize
	}
	if n > DefaultMaxList {
		return nil, 0, refuse(BadParams, "At most %d replays can be listed at once.", DefaultMaxList)
	}
	rs, err := o.d.Replays.List(ctx, n)
	if err != nil {
		return nil, 0, Classify(err, "")
	}
	out := []engine.Replay{}
	hidden := 0
	err = o.permit(ctx, c, func(uid string, g []string) error {
		for _, r := range rs {
			// An unverifiable record shows its id alone: its DLQ is
			// not known, and it must not vanish unseen.
			if r.Unverifiable || o.policy.Allowed(uid, g, commands.ActionRead, r.DLQ) {
				out = append(out, r)
			} else {
				hidden++
			}
		}
		return nil
	})
	if o.policy == nil {
		out = append(out, rs...)
	}
	return out, hidden, err
}

// Control pauses, resumes or cancels replay id for c. Pause is the brake
// `read` on the DLQ can pull; cancel cannot be undone and needs `replay`
// on the DLQ; resume sends more and needs what approving needs (`replay`,
// `publish` on every target). Resume and cancel need a caller that does
// not need a human. A
// terminal user the policy does not name is refused all three. It
// returns the replay as it is after the request (the owner acts within a
// second).
func (o *Ops) Control(ctx context.Context, c Caller, action engine.ControlAction, id string) (r engine.Replay, err error) {
	verb := action.Verb()
	op := map[engine.ControlAction]string{engine.ControlPause: audit.OpPause, engine.ControlResume: audit.OpResume, engine.ControlCancel: audit.OpCancel}[verb]
	if action == engine.ControlResumeResend {
		op = audit.OpResend
	}
	e := audit.Entry{Op: op, ReplayID: id}
	defer func() { o.record(ctx, c, e, err) }()
	if op == "" {
		e.Op = string(action)
		return r, refuse(BadParams, "Unknown action %q; a replay can be paused, resumed or cancelled.", action)
	}
	// Pause is the brake: it is never held back by the audit trail (its
	// begun entry is written first all the same, and a failed write is
	// logged at Error); every other change is.
	if verb != engine.ControlPause {
		if err := o.admit(ctx, c); err != nil {
			return r, err
		}
	}
	r, err = o.d.Engine.Status(ctx, id)
	if err != nil {
		return r, Classify(err, id)
	}
	e.DLQ, e.Vhost, e.TokenRef, e.Messages = r.DLQ, r.Vhost, audit.TokenRef(r.Token), r.Total
	if err := o.mayControl(ctx, c, action, r); err != nil {
		return r, err
	}
	if err := o.begin(ctx, c, e); err != nil && verb != engine.ControlPause {
		return r, err
	}
	after, err := o.d.Engine.Control(ctx, id, action, o.acting(c))
	if err != nil {
		rf := Classify(err, id)
		if x, ok := IsRefusal(rf); ok && x.Code == NotControllable {
			now := r.State
			if after.State != "" {
				now = after.State
			}
			x.Reason = fmt.Sprintf("Replay %s is %s, so it cannot be %s; nothing was changed.", id, now, action.Done())
			if _, why, ok := strings.Cut(err.Error(), engine.ErrNotControllable.Error()+": "); ok && !strings.HasPrefix(why, "it is ") {
				x.Reason = fmt.Sprintf("Replay %s cannot be %s: %s; nothing was changed.", id, action.Done(), why)
			}
		}
		return r, rf
	}
	if cur, err := o.d.Engine.Status(ctx, id); err == nil {
		after = cur
	}
	return after, nil
}

// mayControl is the policy of Control: c named by the policy, the grants
// action needs on r's DLQ (and, to resume, on its targets), and, to
// resume or cancel, a caller that does not need a human. It refuses with a
// *Refusal; it neither changes nor records anything.
func (o *Ops) mayControl(ctx context.Context, c Caller, action engine.ControlAction, r engine.Replay) error {
	if err := o.mayChange(c); err != nil {
		return err
	}
	verb := action.Verb()
	var targets []string
	if f, err := o.d.Tokens.LoadHeader(ctx, r.Token); err == nil {
		targets = f.TargetQueues()
	} else if errors.Is(err, engine.ErrBadSignature) {
		return Classify(err, r.ID)
	} else if verb == engine.ControlResume {
		rf := refuse(NotControllable, "Replay %s cannot be resumed: its preview can no longer be read (%v).", r.ID, err)
		rf.err = err
		return rf
	}
	if err := o.permit(ctx, c, func(uid string, g []string) error {
		return o.policy.CheckControl(uid, g, string(verb), r.DLQ, targets)
	}); err != nil {
		return err
	}
	switch verb {
	case engine.ControlResume:
		return o.human(c, "resume this replay")
	case engine.ControlCancel:
		return o.human(c, "cancel this replay")
	}
	return nil // pausing is a brake anyone who may read the DLQ can pull
}

// MayControl reports whether the policy lets c pause, resume or cancel
// (action) replay r, with exactly Control's checks; it changes nothing
// and records nothing. Whether r's state allows the action is left to
// Control: a front end asks this to offer only the controls c may use.
func (o *Ops) MayControl(ctx context.Context, c Caller, action engine.ControlAction, r engine.Replay) bool {
	return o.mayControl(ctx, c, action, r) == nil
}

// Check reports whether replay id's messages came back; it reads the DLQ
// without changing it, needs `read` on it and counts against the scan
// rate limit.
func (o *Ops) Check(ctx context.Context, c Caller, id string) (rep engine.CheckReport, err error) {
	e := audit.Entry{Op: audit.OpCheck, ReplayID: id}
	defer func() { o.record(ctx, c, e, err) }()
	r, err := o.Replay(ctx, c, id)
	if err != nil {
		return rep, err
	}
	e.DLQ, e.Vhost, e.Messages = r.DLQ, r.Vhost, r.Total
	if err := o.scan(ctx, c, r.Vhost, r.DLQ); err != nil {
		return rep, err
	}
	rep, err = o.d.Engine.Check(ctx, id, "")
	if err != nil {
		return rep, Classify(err, id)
	}
	return rep, nil
}

// Park moves replay id's returned copies at the park limit to the DLQ's
// parking queue: `replay` on the DLQ and `publish` on the parking queue,
// c named by the policy and not needing a human. A failure part way returns what was moved with
// the error.
func (o *Ops) Park(ctx context.Context, c Caller, id string) (res engine.ParkResult, err error) {
	e := audit.Entry{Op: audit.OpPark, ReplayID: id}
	defer func() {
		e.Messages = res.Parked
		o.record(ctx, c, e, err)
	}()
	if err := o.admit(ctx, c); err != nil {
		return res, err
	}
	r, err := o.d.Engine.Status(ctx, id)
	if err != nil {
		return res, Classify(err, id)
	}
	e.DLQ, e.Vhost = r.DLQ, r.Vhost
	if err := o.mayChange(c); err != nil {
		return res, err
	}
	if err := o.permit(ctx, c, func(uid string, g []string) error {
		return o.policy.CheckPark(uid, g, r.DLQ, engine.ParkingQueue(r.DLQ))
	}); err != nil {
		return res, err
	}
	if err := o.human(c, "park these messages"); err != nil {
		return res, err
	}
	if err := o.begin(ctx, c, e); err != nil {
		return res, err
	}
	res, err = o.d.Engine.Park(ctx, id, o.acting(c))
	if err != nil {
		return res, Classify(err, r.DLQ)
	}
	return res, nil
}
