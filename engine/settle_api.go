package engine

import (
	"context"
	"errors"
	"fmt"
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
func (rn *run) counters(ctx context.Context, q string) (QueueCounters, error) {
	c, err := rn.s.d.Counters.Counters(ctx, q)
	if errors.Is(err, ErrManagementDown) {
		rn.apiDown.Add(1)
	}
	return c, err
}

// evidence fills p's Evidence once it was judged, and says in its
// observation when the management API did not answer while it was sent
// or settled.
func (rn *run) evidence(p *sentStep) {
	res := &p.res
	res.Evidence = EvidenceQueues
	if p.proven || p.taken {
		res.Evidence = EvidenceCounters
	}
	for _, w := range p.watches {
		if w.byCounters {
			res.Evidence = EvidenceCounters
		}
	}
	if rn.apiDown.Load() > p.apiMark && res.Evidence == EvidenceQueues {
		from := "the tap"
		if rn.mode != ReturnsTap {
			from = "a re-read of " + rn.r.DLQ
		}
		res.Observation += "; judged by the target queue's own count and " + from + ": the management API is not answering"
	}
}

// stopForAPI stops the replay, resumable, after a judgement that needs the
// management API found it not answering.
func (rn *run) stopForAPI(parent, ctx context.Context, cause error) (Replay, bool, error) {
	rn.r.State = StateStopped
	rn.r.Note = fmt.Sprintf("stopped: only the management API can tell whether a client still holds messages of %s, and it is not answering (%v); nothing is lost: resume once it answers", rn.r.DLQ, cause)
	rn.r.EndedAt = rn.s.d.Clock.Now()
	if err := rn.yield(ctx, StateStopped, StateCancelled); errors.Is(err, ErrDesireChanged) {
		rn.ctl.refresh(ctx)
		return rn.halt(parent, ErrCancelRequested)
	} else if err != nil {
		return rn.r, false, err
	}
	rn.emit(ctx, EventStopped, nil, rn.r.Note)
	return rn.r, false, nil
}
