package replay

import (
	"context"

	"github.com/stroma/dlqbot/engine"
)

// paceOf returns the rate a pass starts at and, for an auto-paced replay,
// the hook its mover calls before each publish (engine/pacer.go): it samples the
// targets this run has sent to when a sample is due, and keeps the
// pacer's status in the replay's record (Replay.Pace), which progress
// writes carry to every front end.
func (rn *run) paceOf(ctx context.Context) (float64, func() float64) {
	prm := rn.r.Params
	if !prm.Auto || prm.Rate < 0 {
		return max(prm.Rate, 0), nil
	}
	if rn.pacer == nil {
		rn.pacer = engine.NewPacer(rn.s.d.Clock, prm.Max, prm.Rate)
	}
	p := rn.pacer
	return p.Rate(), func() float64 {
		if p.Due() && len(rn.paceTargets) > 0 {
			ready, consumers, ok := 0, 0, true
			for q := range rn.paceTargets {
				st, err := rn.s.d.Broker.Inspect(ctx, q)
				if err != nil || !st.Exists {
					ok = false
					break
				}
				ready += st.Ready
				consumers += st.Consumers
			}
			p.Observe(ready, consumers, ok)
			rn.pace.Store(p.Status()) // the run's goroutine copies it into the record (put)
		}
		p.Published(1)
		return p.Rate()
	}
}

// pacedTarget notes a target a pass sends to, for the pacer's samples.
func (rn *run) pacedTarget(q string) {
	if rn.pacer == nil || q == "" {
		return
	}
	if rn.paceTargets == nil {
		rn.paceTargets = map[string]bool{}
	}
	rn.paceTargets[q] = true
}
