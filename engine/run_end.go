package engine

import (
	"context"
	"fmt"
)

// end closes a run whose plan is exhausted. Only a replay that sent every
// message of its preview (and lost none), each copy seen leaving its
// target with none coming back since its step was judged, is finished
// (settle_unjudged.go); any other ends
// stopped, saying loudly what did not happen — above all how many
// messages are missing, neither sent by dlqbot nor in the DLQ.
func (rn *run) end(ctx context.Context) (Replay, error) {
	rn.releaseCursor("the plan is exhausted")
	rn.r.EndedAt = rn.s.d.Clock.Now()
	kind := EventFinished
	rest := ""
	if rn.r.Sent+rn.r.Elsewhere >= rn.r.Total && rn.r.Missing == 0 {
		rest = rn.restNote()
		if d := rn.dupsNote(); d != "" && rest == "" {
			rest = d
		} else if d != "" {
			rest += "; " + d
		}
	}
	if rn.r.Sent+rn.r.Elsewhere >= rn.r.Total && rn.r.Missing == 0 && rest == "" {
		rn.r.State = StateFinished
		rn.r.Note = fmt.Sprintf("%d sent, %d settled, %s, %d missing, %d not delivered", rn.r.Sent, rn.r.Settled, rn.cameBack(), rn.r.Missing, rn.r.Failed)
		rn.r.Note += elsewhereNote(rn.r) + duplicatesNote(rn.r)
	} else {
		rn.markCount(ctx)
		rn.r.State = StateStopped
		rn.r.Note = Shortfall(rn.r)
		if rest != "" {
			rn.r.Note = rest + elsewhereNote(rn.r) + duplicatesNote(rn.r)
		}
		kind = EventStopped
	}
	if err := rn.put(ctx); err != nil {
		return rn.r, err
	}
	if kind == EventFinished {
		rn.emit(ctx, kind, nil, "finished: "+rn.r.Note)
	} else {
		rn.emit(ctx, kind, nil, "stopped: "+rn.r.Note)
	}
	rn.s.scheduleFollowUps(ctx, rn.r)
	return rn.r, nil
}
