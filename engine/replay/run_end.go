package replay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// end closes a run whose plan is exhausted. Only a replay that sent every
// message of its preview (and lost none), each copy seen leaving its
// target with none coming back since its step was judged, is finished
// (settle_unjudged.go); any other ends
// stopped, saying loudly what did not happen — above all how many
// messages are missing, neither sent by dlqbot nor in the DLQ.
func (rn *run) end(ctx context.Context) (engine.Replay, error) {
	rn.releaseCursor("the plan is exhausted")
	rn.r.EndedAt = rn.s.d.Clock.Now()
	kind := engine.EventFinished
	rest := ""
	if rn.r.Sent+rn.r.Elsewhere >= rn.r.Total && rn.r.Missing == 0 {
		rest = rn.jd.restNote()
		if d := rn.rec.dupsNote(); d != "" && rest == "" {
			rest = d
		} else if d != "" {
			rest += "; " + d
		}
	}
	if rn.r.Sent+rn.r.Elsewhere >= rn.r.Total && rn.r.Missing == 0 && rest == "" {
		rn.r.State = engine.StateFinished
		rn.r.Note = fmt.Sprintf("%d sent, %d settled, %s, %d missing, %d not delivered", rn.r.Sent, rn.r.Settled, rn.ret.cameBack(), rn.r.Missing, rn.r.Failed)
		rn.r.Note += engine.ElsewhereNote(rn.r) + duplicatesNote(rn.r)
	} else {
		rn.markCount(ctx)
		rn.r.State = engine.StateStopped
		rn.r.Note = engine.Shortfall(rn.r)
		if rest != "" {
			rn.r.Note = rest + engine.ElsewhereNote(rn.r) + duplicatesNote(rn.r)
		}
		kind = engine.EventStopped
	}
	if err := rn.put(ctx); err != nil {
		return rn.r, err
	}
	if kind == engine.EventFinished {
		rn.emit(ctx, kind, nil, "finished: "+rn.r.Note)
	} else {
		rn.emit(ctx, kind, nil, "stopped: "+rn.r.Note)
	}
	rn.s.scheduleFollowUps(ctx, rn.r)
	return rn.r, nil
}

// scheduleFollowUps queues the follow-up checks of a replay that ended at
// r.EndedAt. Members are deterministic ("<replay>:5m"), so scheduling twice
// schedules once.
func (s *Service) scheduleFollowUps(ctx context.Context, r engine.Replay) {
	for _, d := range s.cfg.FollowUps {
		if err := s.d.Schedule.Add(ctx, r.ID+":"+shortDuration(d), r.EndedAt.Add(d)); err != nil {
			s.base.Warn(r.ID, r.DLQ, "schedule follow-up", err)
		}
	}
}

// shortDuration renders 5m0s as 5m and 24h0m0s as 24h.
func shortDuration(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	s = strings.TrimSuffix(s, "0m")
	if s == "" {
		return "0s"
	}
	return s
}
