package ops

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// permit runs check with the identity the policy checks for c and its
// Slack user groups (looked up only when the policy names any and c is a
// Slack user). A refusal is a *Refusal (Forbidden); when the groups could
// not be read it says that only grants by name counted.
func (o *Ops) permit(ctx context.Context, c Caller, check func(id string, groups []string) error) error {
	if o.policy == nil {
		return nil
	}
	id := o.acting(c)
	var groups []string
	var lookupErr error
	if u := o.slackUser(c); u != "" && o.d.Groups != nil && len(o.policy.Groups()) > 0 {
		groups, lookupErr = o.d.Groups.GroupsOf(ctx, u)
		if lookupErr != nil {
			o.log.Warn().Err(lookupErr).Str("user", u).Msg("user groups lookup failed; only grants by user id count")
		}
	}
	err := check(id, groups)
	if err == nil {
		return nil
	}
	r := Classify(err, "")
	if rf, ok := IsRefusal(r); ok && lookupErr != nil {
		rf.Reason = strings.TrimSuffix(rf.Reason, ".") + " (your Slack user groups could not be read just now, so only grants to you by name counted)."
	}
	return r
}

// mayChange refuses c any state change when c is a terminal user the
// policy does not name.
func (o *Ops) mayChange(c Caller) error {
	if !o.unnamed(c) {
		return nil
	}
	return refuse(Forbidden, "The permissions file (DLQBOT_PERMISSIONS) names no principal for %s, so it may change nothing (replay, resume, pause, cancel, park); list the OS user under a principal's os_users.", c.Identity)
}

// human refuses c a state change (doing) when c needs a human.
func (o *Ops) human(c Caller, doing string) error {
	if !o.needsHuman(c) {
		return nil
	}
	return refuse(NeedsHuman, "A person has to %s: %s may not change a replay itself. Ask someone in Slack or on the dashboard. Nothing was changed.", doing, o.name(c))
}

// fourEyes applies the four-eyes rule to c approving f: without the
// rule, or when c is not f's requester (compared as principals), it
// allows at once. Without a threshold the requester is refused; with one
// the requester's self-approved messages out of f's DLQ within the
// window, f's included, must stay at most the threshold: they are taken
// from the window here, and release gives them back when the approval
// does not happen after all.
func (o *Ops) fourEyes(ctx context.Context, c Caller, f engine.Frozen) (release func(), err error) {
	none := func() {}
	p := o.policy
	if p == nil || !p.Approval.DistinctApprover {
		return none, nil
	}
	me := o.acting(c)
	if p.Person(f.Requester) != me {
		return none, nil
	}
	if p.Approval.Above <= 0 {
		return none, refuse(NeedsSecondPerson, "You asked for this preview, so someone else has to approve it.")
	}
	if f.Total > p.Approval.Above {
		return none, refuse(NeedsSecondPerson, "You asked for this preview, so someone else has to approve it (a replay of more than %d messages needs a second person).", p.Approval.Above)
	}
	key := "selfapproved:" + me + ":" + f.Vhost + "/" + f.DLQ
	t, err := o.d.Windows.Take(ctx, key, f.Total, p.Approval.Above, p.ApprovalWindow())
	if err != nil {
		return none, fmt.Errorf("ops: four-eyes count %s: %w", f.DLQ, err)
	}
	if !t.OK {
		return none, refuse(NeedsSecondPerson, "You asked for this preview, and you approved %d message(s) of your own out of %s within the last %s; with these %d that is over %d, so someone else has to approve it.",
			t.Used, f.DLQ, p.ApprovalWindow(), f.Total, p.Approval.Above)
	}
	return func() {
		if err := o.d.Windows.Give(context.WithoutCancel(ctx), key, t.ID); err != nil {
			o.log.Warn().Err(err).Str("dlq", f.DLQ).Msg("an unused self-approval could not be given back; it counts until the window passes")
		}
	}, nil
}

// whenUnchanged applies approval.when_unchanged to c approving f, when f's
// preview found targets whose consumers were all connected before their
// messages failed (engine.SinceUnchanged): warn (the default) allows,
// second_person refuses f's requester (compared as principals), refuse
// refuses everyone.
func (o *Ops) whenUnchanged(c Caller, f engine.Frozen) error {
	p := o.policy
	if p == nil {
		return nil
	}
	var qs []string
	for _, t := range f.Targets {
		if t.ConsumersSinceFailure == engine.SinceUnchanged {
			qs = append(qs, t.Queue)
		}
	}
	if len(qs) == 0 {
		return nil
	}
	what := fmt.Sprintf("the consumers of %s have been connected since before these messages failed, so the fix may not be deployed", strings.Join(qs, ", "))
	switch p.Approval.WhenUnchanged {
	case commands.WhenUnchangedSecondPerson:
		if p.Person(f.Requester) != o.acting(c) {
			return nil
		}
		return refuse(NeedsSecondPerson, "You asked for this preview, and %s; the permissions file's approval.when_unchanged is second_person, so someone else has to approve it.", what)
	case commands.WhenUnchangedRefuse:
		return refuse(Forbidden, "At the preview %s; the permissions file's approval.when_unchanged is refuse, so no one may approve it. Restart the consumers with the fix, then preview again.", what)
	}
	return nil
}

// scan applies the scan rate limit to c scanning dlq (a preview or a
// check read the DLQ, which on a quorum queue spends delivery budget).
func (o *Ops) scan(ctx context.Context, c Caller, vhost, dlq string) error {
	if o.cfg.ScanLimit < 0 {
		return nil
	}
	key := "scans:" + o.acting(c) + ":" + vhost + "/" + dlq
	t, err := o.d.Windows.Take(ctx, key, 1, o.cfg.ScanLimit, o.cfg.ScanWindow)
	if err != nil {
		return fmt.Errorf("ops: scan limit %s: %w", dlq, err)
	}
	if t.OK {
		return nil
	}
	r := refuse(RateLimited, "You have read %s %d times within %s, which is as often as dlqbot allows (each read of a quorum DLQ spends delivery budget); try again in %s. Nothing was read.",
		dlq, t.Used, o.cfg.ScanWindow, t.RetryAfter.Round(time.Second))
	r.RetryAfter, r.Subject = t.RetryAfter, dlq
	return r
}
