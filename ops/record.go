package ops

import (
	"context"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/redact"
)

// Writable is an audit trail that can tell, before an operation changes
// anything, whether the operation's entry could be written now (the
// store's trail: Redis answers, the caller is within its rate).
type Writable interface {
	Writable(ctx context.Context, principal string) error
}

// admit refuses c's operation with Unavailable when its audit entry
// could not be written now: an operation that cannot be recorded does
// not happen. A state-changing operation calls it before its effect; a
// trail that cannot tell (not a Writable) admits everything.
func (o *Ops) admit(ctx context.Context, c Caller) error {
	w, ok := o.d.Audit.(Writable)
	if !ok {
		return nil
	}
	if err := w.Writable(ctx, o.name(c)); err != nil {
		o.log.Error().Err(err).Str("principal", o.name(c)).Msg("operation refused: its audit entry could not be written")
		return refuse(Unavailable, "The audit trail cannot take this operation's entry just now (too many operations from you in the last minute, or the store is unreachable), so nothing was done; try again in a minute.")
	}
	return nil
}

// begin appends e, an operation of c's that is allowed and about to take
// effect, to the trail as begun (audit.OutcomeBegun), before the effect:
// the effect happens only when begin returns nil, so an operation whose
// entry cannot be written does not happen (refused Unavailable). record
// then appends its outcome, which concludes this entry (audit.Concludes).
// admit, earlier, only refuses before the policy is even applied when the
// trail already cannot take the entry; begin is the write that decides.
func (o *Ops) begin(ctx context.Context, c Caller, e audit.Entry) error {
	e.Time = o.d.Now().UTC()
	e.Principal = o.name(c)
	e.Identity = c.Identity
	e.FrontEnd = c.frontEnd()
	e.Outcome, e.Code = audit.OutcomeBegun, ""
	if err := o.d.Audit.Record(context.WithoutCancel(ctx), e); err != nil {
		o.log.Error().Err(err).Str("op", e.Op).Str("principal", e.Principal).Str("token_ref", e.TokenRef).
			Str("replay_id", e.ReplayID).Msg("an operation's begun audit entry could not be written: refused, unless it is a pause")
		r := refuse(Unavailable, "The audit trail could not take this operation's entry, so nothing was done; try again in a minute.")
		r.err = err
		return r
	}
	return nil
}

// record appends one entry for an operation of c's to the trail: done
// when err is nil, refused with its Code, failed otherwise. It is called
// once per operation, after its outcome is known; an operation that
// changes something was announced by begin before its effect, and this
// entry concludes it. A trail that fails even so is logged at Error.
func (o *Ops) record(ctx context.Context, c Caller, e audit.Entry, err error) {
	e.Time = o.d.Now().UTC()
	e.Principal = o.name(c)
	e.Identity = c.Identity
	e.FrontEnd = c.frontEnd()
	e.Outcome = audit.OutcomeOK
	if err != nil {
		if r, ok := IsRefusal(err); ok {
			e.Outcome, e.Code = audit.OutcomeRefused, string(r.Code)
		} else {
			e.Outcome, e.Code = audit.OutcomeFailed, FailureCode(err)
		}
	}
	if werr := o.d.Audit.Record(context.WithoutCancel(ctx), e); werr != nil {
		o.log.Error().Err(werr).Str("op", e.Op).Str("principal", e.Principal).Str("token_ref", e.TokenRef).
			Str("replay_id", e.ReplayID).Str("outcome", e.Outcome).Msg("audit entry could not be recorded")
	}
	ev := o.log.Info()
	switch {
	case e.Code == string(BadSignature):
		// Someone changed what dlqbot keeps in Redis: loudly, and with
		// the token's reference only.
		ev = o.log.Error().Str("code", e.Code).AnErr("error", err)
	case e.Outcome != audit.OutcomeOK:
		ev = o.log.Warn().Str("code", e.Code)
	}
	ev.Str("op", e.Op).Str("principal", e.Principal).Str("identity", e.Identity).Str("front_end", e.FrontEnd).
		Str("token_ref", e.TokenRef).Str("replay_id", e.ReplayID).Str("dlq", e.DLQ).Str("outcome", e.Outcome).Msg("operation")
}

// RecordAccess appends an entry for a request refused before it named a
// principal (an API call without a known token, a Slack request with a
// bad signature or received twice), so that the trail shows attempts as
// well as operations. claimed is who the request said it was ("" when
// nothing: it is recorded as "anonymous" with its remote address in the
// detail). The trail's rate limit bounds what one claimed caller can add;
// an entry that cannot be written is logged, and the request stays
// refused either way.
func (o *Ops) RecordAccess(ctx context.Context, frontEnd, claimed, op, code, detail string) {
	if claimed == "" {
		claimed = "anonymous"
	}
	e := audit.Entry{Time: o.d.Now().UTC(), Principal: claimed, Identity: claimed, FrontEnd: frontEnd,
		Op: op, Outcome: audit.OutcomeRefused, Code: code, Detail: redact.Tokens(detail)}
	if err := o.d.Audit.Record(context.WithoutCancel(ctx), e); err != nil {
		o.log.Warn().Err(err).Str("op", op).Str("front_end", frontEnd).Msg("audit entry of a refused request could not be recorded")
	}
}

// RecordSession appends an entry for a session's start or end at a front
// end that keeps sessions (the dashboard): op is audit.OpSignIn or
// audit.OpSignOut; done for principal when code is "", refused with code
// otherwise (principal "" then: "anonymous", who the request could not
// name). An entry that cannot be written is logged.
func (o *Ops) RecordSession(ctx context.Context, frontEnd, principal, op, code, detail string) {
	if code != "" {
		o.RecordAccess(ctx, frontEnd, principal, op, code, detail)
		return
	}
	e := audit.Entry{Time: o.d.Now().UTC(), Principal: principal, Identity: principal, FrontEnd: frontEnd,
		Op: op, Outcome: audit.OutcomeOK, Detail: redact.Tokens(detail)}
	if err := o.d.Audit.Record(context.WithoutCancel(ctx), e); err != nil {
		o.log.Error().Err(err).Str("op", op).Str("principal", principal).Str("front_end", frontEnd).Msg("audit entry of a session could not be recorded")
	}
}
