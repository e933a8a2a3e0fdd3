package ops

import (
	"context"
	"sort"
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
const DLQsNote = "Arrivals in the last hour and the top failure group need a read of the DLQ: preview it to see them."

// DLQ is one dead-letter queue in a list of those a caller may read.
type DLQ struct {
	Name string `json:"name"`
	// Messages is its depth (ready messages) and Consumers its consumers,
	// as the management API last sampled them.
	Messages  int    `json:"messages"`
	Consumers int    `json:"consumers"`
	Why       string `json:"why"`
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
// literally — each with its depth, consumers and last replay (from the
// most recent replay records). It reads the broker's queue list, never a
// DLQ's messages.
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
	sort.SliceStable(out.DLQs, func(i, j int) bool {
		a, b := out.DLQs[i], out.DLQs[j]
		if a.Messages != b.Messages {
			return a.Messages > b.Messages
		}
		return a.Name < b.Name
	})
	return out, nil
}
