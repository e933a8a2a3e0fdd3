package ops

import (
	"context"

	"github.com/stroma/dlqbot/audit"
)

// record appends one entry for an operation of c's to the trail: done
// when err is nil, refused with its Code, failed otherwise. It is called
// once per operation, after its outcome is known. A trail that cannot be
// written is logged; it does not undo what was done.
func (o *Ops) record(ctx context.Context, c Caller, e audit.Entry, err error) {
	e.Time = o.d.Now().UTC()
	e.Principal = o.name(c)
	e.Identity = c.Identity
	e.FrontEnd = c.FrontEnd
	if c.Client != "" {
		e.FrontEnd = c.Client
	}
	e.Outcome = audit.OutcomeOK
	if err != nil {
		if r, ok := IsRefusal(err); ok {
			e.Outcome, e.Code = audit.OutcomeRefused, string(r.Code)
		} else {
			e.Outcome, e.Code = audit.OutcomeFailed, FailureCode(err)
		}
	}
	if werr := o.d.Audit.Record(context.WithoutCancel(ctx), e); werr != nil {
		o.log.Warn().Err(werr).Str("op", e.Op).Str("principal", e.Principal).Str("token_ref", e.TokenRef).
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
