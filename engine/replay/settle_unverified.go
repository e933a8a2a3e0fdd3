package replay

import (
	"context"
	"errors"
	"fmt"

	"github.com/stroma/dlqbot/engine"
)

// A run whose tap record of returns fails its check (the store refuses it
// with ErrBadSignature: its counts were lowered or deleted in Redis, its
// floor forged) cannot tell from it which copies came back, and sending
// more while it cannot would go past the threshold unseen: the run stops
// at the look that found it, whether or not the step has settled, and the
// replay's record keeps why (Replay.ReturnsUnverified), so that no later
// run or front end says nothing came back. A resume finds the record
// still refused (the store's floor stays tainted) and goes on re-reading
// the DLQ for returns.

// returned reads the replay's tap record of returns from index from,
// refusing a record that counts fewer returns than this run read before
// (it only grows).
func (jg *judge) returned(ctx context.Context, from int) (engine.ReturnRecord, error) {
	rec, err := jg.s.d.Returns.Returned(ctx, jg.id, from)
	if err == nil && rec.Total < jg.rn.ret.tapTotal {
		err = fmt.Errorf("it counts %d return(s), fewer than the %d this run read from it before (changed in Redis): %w", rec.Total, jg.rn.ret.tapTotal, engine.ErrBadSignature)
	}
	if err != nil {
		return rec, jg.unverified(err)
	}
	return rec, nil
}

// unverified marks the replay's returns unverifiable when err is a record
// that failed its check, and returns err wrapped in ErrReturnsUnverified
// then (err as it is otherwise).
func (jg *judge) unverified(err error) error {
	if !errors.Is(err, engine.ErrBadSignature) {
		return err
	}
	if jg.rn.r.ReturnsUnverified == "" {
		jg.rn.r.ReturnsUnverified = fmt.Sprintf("the tap's record of returns failed its check at %s, with %d seen back: %v",
			jg.s.d.Clock.Now().UTC().Format(engine.UnseenTime), jg.rn.r.Returned, err)
	}
	return fmt.Errorf("%w: %w", engine.ErrReturnsUnverified, err)
}

// stopUnverified stops the replay, resumable, when the tap's record of its
// returns failed its check (cause); no follow-ups are scheduled (they
// would read the same record).
func (jg *judge) stopUnverified(parent, ctx context.Context, cause error) (engine.Replay, bool, error) {
	note := fmt.Sprintf("could not tell whether the copies sent came back (%d seen back): the tap's record of this replay's returns failed its check (changed in Redis outside dlqbot), so nothing more was sent; check the DLQ, and resume to go on finding returns by re-reading it", jg.rn.r.Returned)
	r, stopped, err := jg.rn.stopYield(parent, ctx, note, nil, "stopped: "+note)
	if stopped {
		return r, false, fmt.Errorf("engine: run %s: %w", jg.id, cause)
	}
	return r, false, err
}

// unverifiedBack is cameBack's words for a replay whose tap record of
// returns could not be trusted.
func (jg *judge) unverifiedBack() string {
	return fmt.Sprintf("%d seen back, could not tell for the other copies (the tap's record of returns failed its check)", jg.rn.r.Returned)
}
