package ops

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// Why a queue is listed as a DLQ (DLQ.Why).
const (
	WhyDeadLetterTarget = "dead_letter_target" // another queue dead-letters into it
	WhyName             = "name"               // named as DLQs are (engine.NamedLikeDLQ)
	WhyGrant            = "grant"              // a grant names it
)

// DLQsNote says what a list of DLQs leaves out, and where to find it.
const DLQsNote = "The top failure group is the one the DLQ's latest whole preview saw: preview it to see its groups now."

// ArrivalsWindow is the span a list of DLQs counts arrivals over.
const ArrivalsWindow = time.Hour

// ArrivalCounter counts the messages that reached a queue within the
// last span from the broker's own statistics, reading no message; since
// is where those begin when they cover less than span (zero otherwise).
// The broker adapter implements it (amqp.Broker.Arrivals).
type ArrivalCounter interface {
	Arrivals(ctx context.Context, queue string, span time.Duration) (n int, since time.Time, err error)
}

// arrivalCalls is how many DLQs' arrivals a list asks the broker for at
// once.
const arrivalCalls = 4

// DLQ is one dead-letter queue in a list of those a caller may read.
type DLQ struct {
	Name string `json:"name"`
	// Messages is its depth (ready messages) and Consumers its consumers,
	// as the management API last sampled them.
	Messages  int    `json:"messages"`
	Consumers int    `json:"consumers"`
	Why       string `json:"why"`
	// ArrivalsLastHour counts the messages that reached it within the
	// last hour (ArrivalsWindow), or since ArrivalsSince when the
	// broker's samples cover less; nil (null) when the management API
	// cannot tell.
	ArrivalsLastHour *int      `json:"arrivals_last_hour"`
	ArrivalsSince    time.Time `json:"arrivals_since,omitzero"`
	// TopGroup is the largest failure group the DLQ's latest whole
	// preview saw; nil when none is kept.
	TopGroup *TopGroup `json:"top_group,omitempty"`
	// LastReplay is the most recent replay out of it among the recent
	// replay records; nil when there is none.
	LastReplay *LastReplay `json:"last_replay,omitempty"`
}

// LastReplay is what a list of DLQs shows of a DLQ's last replay.
type LastReplay struct {
	ID        string       `json:"replay_id"`
	State     engine.State `json:"state"`
	CreatedAt time.Time    `json:"created_at"`
	Total     int          `json:"total"`
	Sent      int          `json:"sent"`
	Returned  int          `json:"returned"`
}

// TopGroup is what a list of DLQs shows of a failure group: its id and
// exception type (or dead-letter reason), never its text.
type TopGroup struct {
	GroupID  string `json:"group_id"`
	Type     string `json:"type"`
	Messages int    `json:"messages"`
	// SeenAt is when the preview that saw it was made.
	SeenAt time.Time `json:"seen_at"`
}

// DLQs is ListDLQs's answer.
type DLQs struct {
	DLQs []DLQ `json:"dlqs"`
	// Hidden counts the DLQs c may not read, left out.
	Hidden int `json:"hidden"`
	// Note says what the list leaves out (DLQsNote).
	Note string `json:"note"`
}

// ListDLQs lists the dead-letter queues of the vhost c may read
// (`read`, checked per DLQ; the others are counted in Hidden, never
// named), deepest first: the queues another queue dead-letters into,
// those named as DLQs are (engine.NamedLikeDLQ), and those a grant names
// literally — each with its depth, consumers, arrivals in the last hour
// (one request to the management API per DLQ listed), top failure group
// (from its latest whole preview) and last replay (from the most recent
// replay records). It reads the broker's queue list and statistics, never
// a DLQ's messages; arrivals or a group it cannot tell are left out, the
// list stands.
func (o *Ops) ListDLQs(ctx context.Context, c Caller) (DLQs, error) {
	out := DLQs{DLQs: []DLQ{}, Note: DLQsNote}
	if o.d.Queues == nil {
		return out, refuse(Unavailable, "This dlqbot cannot list queues: it has no management API to ask.")
	}
	qs, err := o.d.Queues.ListQueues(ctx)
	if err != nil {
		return out, Classify(err, "")
	}
	named := map[string]bool{}
	for _, q := range o.policy.NamedQueues(commands.ActionRead) {
		named[q] = true
	}
	var candidates []DLQ
	for _, q := range qs {
		why := ""
		switch {
		case q.DeadLetterTarget:
			why = WhyDeadLetterTarget
		case engine.NamedLikeDLQ(q.Name):
			why = WhyName
		case named[q.Name]:
			why = WhyGrant
		default:
			continue
		}
		candidates = append(candidates, DLQ{Name: q.Name, Messages: q.Messages, Consumers: q.Consumers, Why: why})
	}
	if o.policy == nil {
		out.DLQs = candidates
	} else if err := o.permit(ctx, c, func(uid string, g []string) error {
		for _, d := range candidates {
			if o.policy.Allowed(uid, g, commands.ActionRead, d.Name) {
				out.DLQs = append(out.DLQs, d)
			} else {
				out.Hidden++
			}
		}
		return nil
	}); err != nil {
		return DLQs{DLQs: []DLQ{}, Note: DLQsNote}, err
	}
	if len(out.DLQs) > 0 {
		rs, err := o.d.Replays.List(ctx, DefaultMaxList)
		if err != nil {
			return DLQs{DLQs: []DLQ{}, Note: DLQsNote}, Classify(err, "")
		}
		last := map[string]engine.Replay{}
		for _, r := range rs {
			if r.Unverifiable || r.DLQ == "" {
				continue
			}
			if cur, ok := last[r.DLQ]; !ok || r.CreatedAt.After(cur.CreatedAt) {
				last[r.DLQ] = r
			}
		}
		for i, d := range out.DLQs {
			if r, ok := last[d.Name]; ok {
				out.DLQs[i].LastReplay = &LastReplay{ID: r.ID, State: r.State, CreatedAt: r.CreatedAt,
					Total: r.Total, Sent: r.Sent, Returned: r.Returned}
			}
		}
	}
	o.arrivals(ctx, out.DLQs)
	o.topGroups(ctx, out.DLQs)
	sort.SliceStable(out.DLQs, func(i, j int) bool {
		a, b := out.DLQs[i], out.DLQs[j]
		if a.Messages != b.Messages {
			return a.Messages > b.Messages
		}
		return a.Name < b.Name
	})
	return out, nil
}

// arrivals fills each DLQ's arrivals in the last hour, asking the broker
// for a few DLQs at once; a DLQ whose count fails stays unknown.
func (o *Ops) arrivals(ctx context.Context, ds []DLQ) {
	if o.d.Arrivals == nil {
		return
	}
	sem := make(chan struct{}, arrivalCalls)
	var wg sync.WaitGroup
	for i := range ds {
		wg.Add(1)
		sem <- struct{}{}
		go func(d *DLQ) {
			defer func() { <-sem; wg.Done() }()
			n, since, err := o.d.Arrivals.Arrivals(ctx, d.Name, ArrivalsWindow)
			if err != nil {
				o.log.Debug().Err(err).Str("dlq", d.Name).Msg("list: the DLQ's arrivals are unknown")
				return
			}
			d.ArrivalsLastHour, d.ArrivalsSince = &n, since
		}(&ds[i])
	}
	wg.Wait()
}

// topGroups fills each DLQ's top failure group from what its latest
// whole preview saw (GroupsSeen).
func (o *Ops) topGroups(ctx context.Context, ds []DLQ) {
	if o.d.GroupsSeen == nil {
		return
	}
	for i := range ds {
		a, ok, err := o.d.GroupsSeen.Groups(ctx, ds[i].Name)
		if err != nil {
			o.log.Warn().Err(err).Str("dlq", ds[i].Name).Msg("list: the failure groups last seen in the DLQ could not be read")
			continue
		}
		if ok && len(a.Groups) > 0 {
			g := a.Groups[0]
			ds[i].TopGroup = &TopGroup{GroupID: g.GroupID, Type: g.Type, Messages: g.Messages, SeenAt: a.Now}
		}
	}
}
