package commands

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Action is what a grant allows on a queue.
type Action string

// The actions.
const (
	// ActionRead allows previewing a DLQ (a preview shows payloads) and
	// seeing its replays.
	ActionRead Action = "read"
	// ActionReplay allows approving or starting a replay out of a DLQ.
	ActionReplay Action = "replay"
	// ActionPublish allows a replay to send messages to a target queue.
	ActionPublish Action = "publish"
)

// Actions lists every action.
var Actions = []Action{ActionRead, ActionReplay, ActionPublish}

// ErrForbidden is wrapped by every refusal of the Check helpers; the
// refusal's Error() is a sentence to show the user as it is.
var ErrForbidden = errors.New("commands: forbidden")

// ForbiddenError is a refusal: Reason says what the user lacks.
type ForbiddenError struct {
	Reason string
}

// Error returns the user-readable reason.
func (e *ForbiddenError) Error() string { return e.Reason }

// Unwrap returns ErrForbidden.
func (e *ForbiddenError) Unwrap() error { return ErrForbidden }

// Policy is a loaded permissions file. A nil *Policy means access control
// is off: everything is allowed and no distinct approver is required.
type Policy struct {
	Roles    []Role
	Approval Approval
	// Principals are the HTTP API's and MCP endpoint's clients; without
	// any, the API lets nobody in.
	Principals []Principal
	// Redaction hides header and body values before anything leaves the
	// process; Channels limits where previews may be posted (see
	// policy_redaction.go).
	Redaction Redaction
	Channels  []ChannelRule
	// Watch names the DLQs `dlqbot serve` watches and where their alerts
	// go (policy_watch.go).
	Watch []WatchRule
}

// Role binds Slack users and user groups to grants.
type Role struct {
	Name       string
	Users      []string // Slack member ids (U…, W…)
	UserGroups []string // Slack user group ids (S…)
	// Principals names API principals (not mapped to a Slack user) that
	// have the role; they act as "api:<name>".
	Principals []string
	Grants     []Grant
}

// Grant allows Actions on every queue matching one of Queues. A pattern's
// * matches any run of characters (dots and slashes included), ? exactly
// one, and \ makes the next character literal.
type Grant struct {
	Queues  []string
	Actions []Action
}

// DefaultApprovalWindow is Approval.Window's default.
const DefaultApprovalWindow = 24 * time.Hour

// Approval holds the approval rules. The operations layer (package ops)
// applies them, comparing principals rather than identity strings.
type Approval struct {
	// DistinctApprover is set when a requester may not approve (or quote
	// the token of) their own preview.
	DistinctApprover bool
	// Above, when positive, limits DistinctApprover: a requester may
	// approve their own previews while the messages they self-approved
	// out of one DLQ within Window, this one included, are at most Above.
	Above int
	// Window is how far back self-approved messages count against Above
	// (approval.window); default 24 hours.
	Window time.Duration
	// WhenUnchanged is what an approval does when the preview found a
	// target whose consumers were all connected before its messages
	// failed (approval.when_unchanged); the zero value is WhenUnchangedWarn.
	WhenUnchanged WhenUnchanged
}

// WhenUnchanged is the approval rule for a preview whose target's
// consumers were not restarted since its messages failed.
type WhenUnchanged string

// The approval.when_unchanged values.
const (
	// WhenUnchangedWarn: the preview warns; anyone may approve ("" too).
	WhenUnchangedWarn WhenUnchanged = "warn"
	// WhenUnchangedSecondPerson: the requester may not approve it.
	WhenUnchangedSecondPerson WhenUnchanged = "second_person"
	// WhenUnchangedRefuse: no one may approve it; preview again once the
	// consumers were restarted.
	WhenUnchangedRefuse WhenUnchanged = "refuse"
)

// ApprovalWindow returns the window self-approvals count over.
func (p *Policy) ApprovalWindow() time.Duration {
	if p == nil || p.Approval.Window <= 0 {
		return DefaultApprovalWindow
	}
	return p.Approval.Window
}

// Need is one permission an operation requires: Action on every queue.
type Need struct {
	Action Action
	Queues []string
}

// Allowed reports whether user, a member of groups, may do action on queue.
// A nil Policy allows everything.
func (p *Policy) Allowed(user string, groups []string, action Action, queue string) bool {
	if p == nil {
		return true
	}
	for _, r := range p.Roles {
		if !r.has(user, groups) {
			continue
		}
		for _, g := range r.Grants {
			if g.allows(action, queue) {
				return true
			}
		}
	}
	return false
}

func (r Role) has(user string, groups []string) bool {
	if user != "" && slices.Contains(r.Users, user) {
		return true
	}
	if name, ok := principalName(user); ok && name != "" && slices.Contains(r.Principals, name) {
		return true
	}
	for _, g := range groups {
		if g != "" && slices.Contains(r.UserGroups, g) {
			return true
		}
	}
	return false
}

func (g Grant) allows(action Action, queue string) bool {
	if !slices.Contains(g.Actions, action) {
		return false
	}
	for _, q := range g.Queues {
		if matchGlob(q, queue) {
			return true
		}
	}
	return false
}

// NeedsDistinctApprover reports whether a replay of this many messages
// must be approved by someone other than its requester, counting alone.
// With a threshold (Approval.Above) the operations layer also counts the
// requester's earlier self-approvals out of the same DLQ within
// Approval.Window.
func (p *Policy) NeedsDistinctApprover(messages int) bool {
	if p == nil || !p.Approval.DistinctApprover {
		return false
	}
	return p.Approval.Above <= 0 || messages > p.Approval.Above
}

// Groups returns the user group ids the policy names, sorted. When it is
// empty the bot need not look up anyone's groups.
func (p *Policy) Groups() []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, r := range p.Roles {
		out = append(out, r.UserGroups...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Require returns nil when user may do every need, else a *ForbiddenError
// naming what is missing, such as "You need `replay` on orders.dlq and
// `publish` on orders, payments to approve this replay." doing completes
// the sentence ("to approve this replay").
func (p *Policy) Require(user string, groups []string, doing string, needs ...Need) error {
	if p == nil {
		return nil
	}
	var parts []string
	for _, n := range needs {
		var missing []string
		for _, q := range n.Queues {
			if q != "" && !slices.Contains(missing, q) && !p.Allowed(user, groups, n.Action, q) {
				missing = append(missing, q)
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			parts = append(parts, fmt.Sprintf("`%s` on %s", n.Action, strings.Join(missing, ", ")))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	msg := "You need " + strings.Join(parts, " and ") + " " + doing
	if !p.inAnyRole(user, groups) {
		msg += "; you are in no role of the permissions file, so ask whoever maintains it"
	}
	return &ForbiddenError{Reason: msg + "."}
}

func (p *Policy) inAnyRole(user string, groups []string) bool {
	for _, r := range p.Roles {
		if r.has(user, groups) {
			return true
		}
	}
	return false
}

// CheckPreview checks that user may preview dlq: `read` on it.
func (p *Policy) CheckPreview(user string, groups []string, dlq string) error {
	return p.Require(user, groups, "to preview it (a preview shows payloads)", Need{ActionRead, []string{dlq}})
}

// CheckRead checks that user may see dlq's replays (status, check, list
// entries): `read` on it. doing completes the refusal ("to check this
// replay").
func (p *Policy) CheckRead(user string, groups []string, dlq, doing string) error {
	return p.Require(user, groups, doing, Need{ActionRead, []string{dlq}})
}

// CheckApprove checks the grants approving needs, or starting a replay
// by quoting its token: `replay` on dlq and `publish` on every target.
// The four-eyes rule is the operations layer's (package ops): it compares
// principals, which an identity string alone cannot tell.
func (p *Policy) CheckApprove(user string, groups []string, dlq string, targets []string) error {
	return p.Require(user, groups, "to approve this replay",
		Need{ActionReplay, []string{dlq}}, Need{ActionPublish, targets})
}

// CheckControl checks that user may pause, resume or cancel (verb) a replay
// out of dlq into targets. Pause never sends anything and can be undone,
// so `read` on the DLQ is enough to pull the brake; cancel cannot be
// undone and needs `replay` on the DLQ; resume sends more messages and
// needs what approving needs (without the distinct-approver rule). Any
// other verb is checked like resume.
func (p *Policy) CheckControl(user string, groups []string, verb, dlq string, targets []string) error {
	doing := "to " + verb + " this replay"
	switch verb {
	case "pause":
		return p.Require(user, groups, doing, Need{ActionRead, []string{dlq}})
	case "cancel":
		return p.Require(user, groups, doing+" (a cancelled replay cannot be resumed)", Need{ActionReplay, []string{dlq}})
	}
	return p.Require(user, groups, doing, Need{ActionReplay, []string{dlq}}, Need{ActionPublish, targets})
}

// CheckPark checks that user may move a replay's messages out of dlq into
// the parking queue: `replay` on dlq and `publish` on parking.
func (p *Policy) CheckPark(user string, groups []string, dlq, parking string) error {
	return p.Require(user, groups, "to park these messages",
		Need{ActionReplay, []string{dlq}}, Need{ActionPublish, []string{parking}})
}

// matchGlob reports whether name matches pattern: * matches any run of
// characters (dots and slashes too), ? exactly one, \x the character x.
func matchGlob(pattern, name string) bool {
	type elem struct {
		r    rune
		star bool
		any  bool
	}
	var pat []elem
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		switch {
		case rs[i] == '\\' && i+1 < len(rs):
			i++
			pat = append(pat, elem{r: rs[i]})
		case rs[i] == '*':
			pat = append(pat, elem{star: true})
		case rs[i] == '?':
			pat = append(pat, elem{any: true})
		default:
			pat = append(pat, elem{r: rs[i]})
		}
	}
	str := []rune(name)
	// Greedy matching with backtracking to the last star: linear in
	// practice, O(len(pattern)·len(name)) at worst.
	pi, si, starP, starS := 0, 0, -1, 0
	for si < len(str) {
		switch {
		case pi < len(pat) && pat[pi].star:
			starP, starS = pi, si
			pi++
		case pi < len(pat) && (pat[pi].any || pat[pi].r == str[si]):
			pi++
			si++
		case starP >= 0:
			starS++
			pi, si = starP+1, starS
		default:
			return false
		}
	}
	for pi < len(pat) && pat[pi].star {
		pi++
	}
	return pi == len(pat)
}
