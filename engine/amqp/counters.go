package amqp

import (
	"context"
	"sync"
	"time"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.CounterReader = (*Broker)(nil)

// counterMarks holds, by queue, the highest delivery counters an answer
// of the management API has shown this process, so that Counters can tell
// an answer that left them out (or fell behind them) from a queue that has
// counted nothing.
type counterMarks struct {
	mu sync.Mutex
	m  map[string]counterMark
}

// counterMark is the highest deliver_get and ack a queue's answers showed,
// and, while newer answers show less, the sample time of the first of
// those.
type counterMark struct {
	deliverGet, ack int64
	lapsedAt        time.Time
}

// Counters returns queue's management counters in the engine's terms.
//
// An answer whose message_stats are absent, or whose deliver_get or ack
// are below what an earlier answer for the queue showed, is Lapsed: its
// counters mean nothing (the API left them out, or they were reset). The
// broker's next statistics sample decides: when it shows the same, the
// queue's counters are taken to be that low now (reset, or declared again)
// and the answer is no longer Lapsed.
func (b *Broker) Counters(ctx context.Context, queue string) (engine.QueueCounters, error) {
	s, err := b.QueueStats(ctx, queue)
	if err != nil {
		return engine.QueueCounters{}, err
	}
	c := engine.QueueCounters{
		Ready: int(s.Ready), Unacked: int(s.Unacked), Consumers: s.Consumers,
		Publish: s.Publish, DeliverGet: s.DeliverGet, Ack: s.Ack, Redeliver: s.Redeliver, SampledAt: s.SampledAt,
		Listed: s.Listed, NoAck: s.NoAck,
	}
	c.Lapsed = b.counters.note(queue, s)
	return c, nil
}

// note records s's counters for queue and reports whether they lapsed
// (see Counters).
func (cm *counterMarks) note(queue string, s QueueStats) bool {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	if cm.m == nil {
		cm.m = map[string]counterMark{}
	}
	mk, seen := cm.m[queue]
	below := seen && (s.DeliverGet < mk.deliverGet || s.Ack < mk.ack ||
		!s.HasStats && (mk.deliverGet > 0 || mk.ack > 0))
	if below {
		switch {
		case s.SampledAt.IsZero():
			return true // no way to tell this sample from the next
		case mk.lapsedAt.IsZero():
			mk.lapsedAt = s.SampledAt
			cm.m[queue] = mk
			return true
		case !s.SampledAt.After(mk.lapsedAt):
			return true // the same sample again
		}
		// A newer sample agrees: the counters are that low now.
	}
	if s.HasStats || !seen || below {
		cm.m[queue] = counterMark{deliverGet: s.DeliverGet, ack: s.Ack}
	}
	return false
}
