package replay

import (
	"context"
	"errors"
	"fmt"

	"github.com/stroma/dlqbot/engine"
)

// The management API is a hint a step never waits on (the adapter leaves
// an API that did not answer alone for a while and fails at once, with
// ErrManagementDown, meanwhile). A step then settles on what AMQP itself
// shows: the targets' ready counts, by passive declare, and the returns
// found through the DLQ's tap (or a re-read of the DLQ), and its line says
// so. A judgement only the API's counts can make (whether a client still
// holds messages of the DLQ before a message is called missing; the read
// budget of a quorum DLQ) stops the replay instead, resumable, naming the
// API.

// counters reads q's management counters, counting a read the API did
// not answer (rn.apiDown).
func (jg *judge) counters(ctx context.Context, q string) (engine.QueueCounters, error) {
	c, err := jg.s.d.Counters.Counters(ctx, q)
	if errors.Is(err, engine.ErrManagementDown) {
		jg.apiDown.Add(1)
	}
	return c, err
}

// evidence fills p's Evidence once it was judged, and says in its
// observation when the management API did not answer while it was sent
// or settled.
func (jg *judge) evidence(p *sentStep) {
	res := &p.res
	res.Evidence = engine.EvidenceQueues
	if p.proven || p.taken {
		res.Evidence = engine.EvidenceCounters
	}
	for _, w := range p.watches {
		if w.byCounters {
			res.Evidence = engine.EvidenceCounters
		}
	}
	if jg.apiDown.Load() > p.apiMark && res.Evidence == engine.EvidenceQueues {
		from := "the tap"
		if jg.rn.ret.mode != engine.ReturnsTap {
			from = "a re-read of " + jg.dlq
		}
		res.Observation += "; judged by the target queue's own count and " + from + ": the management API is not answering"
	}
}

// stopForAPI stops the replay, resumable, after a judgement that needs the
// management API found it not answering.
func (jg *judge) stopForAPI(parent, ctx context.Context, cause error) (engine.Replay, bool, error) {
	jg.rn.r.State = engine.StateStopped
	jg.rn.r.Note = fmt.Sprintf("stopped: only the management API can tell whether a client still holds messages of %s, and it is not answering (%v); nothing is lost: resume once it answers", jg.dlq, cause)
	jg.rn.r.EndedAt = jg.s.d.Clock.Now()
	if err := jg.rn.yield(ctx, engine.StateStopped, engine.StateCancelled); errors.Is(err, engine.ErrDesireChanged) {
		jg.rn.ctl.refresh(ctx)
		return jg.rn.halt(parent, engine.ErrCancelRequested)
	} else if err != nil {
		return jg.rn.r, false, err
	}
	jg.rn.emit(ctx, engine.EventStopped, nil, jg.rn.r.Note)
	return jg.rn.r, false, nil
}
