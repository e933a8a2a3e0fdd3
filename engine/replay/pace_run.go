package replay

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// paceOf returns the rate a pass starts at and, for an auto-paced replay,
// the hook its mover calls before each publish (engine/pacer.go). When a
// sample of the targets this run has sent to is due, the hook starts one
// (targetSample) and publishes on; a later call hands its result to the
// pacer, dated when the sample ended: the run's clock when it began, plus
// the time it took. A sample is a passive declare per target (Broker.Look:
// no management API), a round trip that took up to 650 ms on a loaded
// machine: taken in the publish loop, it stopped the publishes for that
// long. A sample still out after 1.5 s slows the publishes to one a
// second until it ends (Pacer.RateSampling): the pacer never sends long
// unmeasured. The hook keeps the pacer's status in the replay's record
// (Replay.Pace), which progress writes carry to every front end.
func (rn *run) paceOf(ctx context.Context) (float64, func() float64) {
	prm := rn.r.Params
	if !prm.Auto || prm.Rate < 0 {
		return max(prm.Rate, 0), nil
	}
	if rn.pacer == nil {
		rn.pacer = engine.NewPacer(rn.s.d.Clock, prm.Max, prm.Rate)
	}
	p := rn.pacer
	// inflight is the sample being taken, nil when none is. One left in
	// flight when the pass ends is dropped with the hook: the next pass
	// samples afresh.
	var inflight chan targetSample
	var began time.Time
	held := false // the publishes are held for a late sample, and the status says so
	return p.Rate(), func() float64 {
		if inflight != nil {
			select {
			case s := <-inflight:
				inflight, held = nil, false
				p.ObserveAt(began.Add(s.took), s.ready, s.consumers, s.ok)
				rn.pace.Store(p.Status()) // the run's goroutine copies it into the record (put)
			default:
			}
		}
		if inflight == nil && p.Due() && len(rn.paceTargets) > 0 {
			inflight, began = make(chan targetSample, 1), rn.s.d.Clock.Now()
			go rn.inspectPaced(ctx, slices.Sorted(maps.Keys(rn.paceTargets)), inflight)
		}
		p.Published(1)
		if inflight == nil {
			return p.Rate()
		}
		rate := p.RateSampling(began) // a late sample holds the publishes back
		if rate < p.Rate() && !held {
			held = true
			rn.pace.Store(p.StatusSampling(began))
		}
		return rate
	}
}

// targetSample is the targets' summed ready and consumer counts and how
// long the declares took; ok is false when one could not be inspected.
type targetSample struct {
	took             time.Duration
	ready, consumers int
	ok               bool
}

// inspectPaced inspects queues and sends the sample to out (buffered:
// nobody may be left to read it).
func (rn *run) inspectPaced(ctx context.Context, queues []string, out chan<- targetSample) {
	start := time.Now()
	s := targetSample{ok: true}
	for _, q := range queues {
		st, err := rn.s.d.Broker.Look(ctx, q)
		if err != nil || !st.Exists {
			s.ok = false
			break
		}
		s.ready += st.Ready
		s.consumers += st.Consumers
	}
	s.took = time.Since(start)
	out <- s
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
