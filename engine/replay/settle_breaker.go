package replay

import (
	"context"

	"github.com/stroma/dlqbot/engine"
)

// breaker watches for returns while a step sends beside the step before
// it, still unjudged (settle_overlap.go): it drains the DLQ's tap every
// SettlePoll and trips as soon as the replay's record holds more returns
// than the run counted, which stops the step's sends before its next
// publish (errTripped, through the move's Continue). The returns
// themselves are counted, listed and judged afterwards by the unjudged
// step's settling, as always. It also watches the unjudged step's targets
// (watchStep), so that the step's grace runs from when its copies were
// seen delivered, during the sends, not from when it is judged: a step
// judged after the next one sent then waits no grace of its own, unless
// its copies took longer to leave. stop ends the watch; without an
// unjudged step there is nothing to watch, and stop does nothing.
func (jg *judge) breaker(parent context.Context) (stop func()) {
	jg.tripped.Store(false)
	if jg.pending == nil || jg.rn.ret.mode != engine.ReturnsTap {
		return func() {}
	}
	ctx, cancel := context.WithCancel(parent)
	done := make(chan struct{})
	id, dlq, counted, listed, older := jg.id, jg.dlq, jg.rn.ret.tapTotal, jg.rn.ret.listed, jg.pending
	go func() {
		defer close(done)
		for {
			jg.watchStep(ctx, older, jg.s.d.Clock.Now())
			// Errors are for the step's settling to report; the watch
			// only ever stops sends early.
			if _, err := jg.s.base.RecordTap(ctx, dlq); err == nil {
				if rec, err := jg.s.d.Returns.Returned(ctx, id, listed); err == nil && rec.Total > counted {
					jg.tripped.Store(true)
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-jg.s.d.Clock.After(jg.s.cfg.SettlePoll):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// mayContinue is a step's MoveRequest.Continue: its sends stop on a stop
// cause (pause, cancel, lost lease, shutdown) or once the breaker tripped
// (errTripped).
func (jg *judge) mayContinue(ctx context.Context) func() error {
	return func() error {
		if err := jg.rn.stopCause(ctx); err != nil {
			return err
		}
		if jg.tripped.Load() {
			return errTripped
		}
		return nil
	}
}
