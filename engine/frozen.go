package engine

import (
	"context"
	"iter"
	"slices"
	"time"
)

// Item is one distinct message of a frozen preview: an id, how many
// identical copies were selected, where each goes, and what it failed with.
type Item struct {
	ID     string `json:"id"`
	Count  int    `json:"count"`
	Target string `json:"target"`
	Group  string `json:"group"`
	// Seq is the DLQ position of the first copy when previewed.
	Seq int `json:"seq"`
}

// ItemColumns are a preview's items column by column, in DLQ order: what
// a run's plan keeps of them (plan.go) without an Item for each (64 bytes;
// a million of them in a large preview). Item i is IDs[i], Count[i] copies,
// DLQ position Seq[i], and Classes[Class[i]] its target and failure group.
type ItemColumns struct {
	IDs     []string
	Count   []int32
	Seq     []int32
	Class   []uint32
	Classes [][2]string // target, failure group
}

// Len is how many items there are.
func (c ItemColumns) Len() int { return len(c.IDs) }

// Columns returns items column by column, each (target, failure group)
// once in Classes, in order of first use.
func Columns(items []Item) ItemColumns {
	n := len(items)
	c := ItemColumns{IDs: make([]string, n), Count: make([]int32, n), Seq: make([]int32, n), Class: make([]uint32, n)}
	classOf := map[[2]string]uint32{}
	var prev [2]string // the previous item's class: most often this one's too
	var k uint32
	for i, it := range items {
		if key := [2]string{it.Target, it.Group}; i == 0 || key != prev {
			var ok bool
			if k, ok = classOf[key]; !ok {
				k = uint32(len(c.Classes))
				classOf[key] = k
				c.Classes = append(c.Classes, key)
			}
			prev = key
		}
		c.IDs[i], c.Count[i], c.Seq[i], c.Class[i] = it.ID, int32(it.Count), int32(it.Seq), k
	}
	return c
}

// TargetSnapshot is a target queue's state when the preview was made.
type TargetSnapshot struct {
	Queue     string `json:"queue"`
	Exists    bool   `json:"exists"`
	Consumers int    `json:"consumers"`
	Messages  int    `json:"messages"` // selected messages bound for it
	// ConsumersSinceFailure is the preview's verdict on its consumers
	// (TargetView.ConsumersSinceFailure; "" in tokens made before it was
	// kept): the approval policy reads it.
	ConsumersSinceFailure Since `json:"consumers_since_failure,omitempty"`
}

// Frozen is what a preview token freezes: the exact multiset of ids,
// the DLQ, the targets and who asked.
type Frozen struct {
	Token     string           `json:"token"`
	DLQ       string           `json:"dlq"`
	Vhost     string           `json:"vhost"`
	Selection string           `json:"selection"` // canonical text of the selection
	To        string           `json:"to,omitempty"`
	Requester string           `json:"requester"`
	CreatedAt time.Time        `json:"created_at"`
	ExpiresAt time.Time        `json:"expires_at"`
	Items     []Item           `json:"items"` // in DLQ order
	Targets   []TargetSnapshot `json:"targets"`
	Total     int              `json:"total"` // sum of Items[].Count
	// ParkAfter is the selection's park limit (replays after which a
	// message is parked rather than replayed).
	ParkAfter int `json:"park_after"`
	// Proof is what the approval needs to prove, without reading the DLQ,
	// that no previewed message left it (package proof); nil when the
	// preview could not freeze one.
	Proof *ApprovalProof `json:"proof,omitempty"`
	// Distinct is how many items the preview froze (len(Items) when they
	// are loaded); LoadHeader sets it without loading them.
	Distinct int `json:"-"`
	// ItemTargets are the items' distinct target queues, in order of first
	// use; Load and LoadHeader set them (a header names every queue a
	// replay of it publishes to without its items).
	ItemTargets []string `json:"-"`
	// Card is what the preview's channel post showed beside this header
	// (PreviewCard); nil when the token keeps none.
	Card *PreviewCard `json:"card,omitempty"`
	// Each, when set, yields the items in place of Items when the token
	// is saved (it may be called more than once): a large preview never
	// holds all its items at once. A loaded Frozen has Items, never Each.
	Each iter.Seq[Item] `json:"-"`
}

// Tokens stores previews under unguessable tokens.
type Tokens interface {
	// Save stores f under a new token (≥128 random bits) for ttl and returns
	// the token; f.Token and f.ExpiresAt are set by Save.
	Save(ctx context.Context, f Frozen, ttl time.Duration) (string, error)
	// Load returns the preview behind token; ErrTokenNotFound when it is
	// unknown or expired.
	Load(ctx context.Context, token string) (Frozen, error)
	// LoadFirst is Load with only the first n items or a few more (n < 0:
	// all; Distinct says how many there are), the whole token still
	// checked: what an approval that the broker proves needs.
	LoadFirst(ctx context.Context, token string, n int) (Frozen, error)
	// LoadColumns is Load with the items column by column (the returned
	// Frozen's Items nil, Distinct set): what a run's plan keeps of them,
	// without a million Items in between.
	LoadColumns(ctx context.Context, token string) (Frozen, ItemColumns, error)
	// LoadHeader is Load without the items (Items nil; Distinct and
	// ItemTargets set): what permission checks and summaries need, read
	// without decoding a large preview's items.
	LoadHeader(ctx context.Context, token string) (Frozen, error)
	// Consume marks token used by replayID, atomically: exactly one caller
	// succeeds; the others get ErrTokenUsed (or ErrTokenNotFound).
	Consume(ctx context.Context, token, replayID string) error
	// Release undoes Consume by replayID when that approval did not go
	// ahead (the world changed and the approver must confirm again).
	Release(ctx context.Context, token, replayID string) error
	// Discard deletes an unused token.
	Discard(ctx context.Context, token string) error
	// Retain keeps a consumed token's preview for d beyond its TTL: a
	// replay reads its frozen preview until it ends.
	Retain(ctx context.Context, token string, d time.Duration) error
}

// TargetQueues lists the target queues of a frozen preview, sorted, each
// once: the queues a replay of it publishes to (what approving it needs
// `publish` on).
func (f Frozen) TargetQueues() []string {
	var out []string
	for _, t := range f.Targets {
		if !slices.Contains(out, t.Queue) {
			out = append(out, t.Queue)
		}
	}
	for _, q := range f.ItemTargets {
		if q != "" && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	for _, it := range f.Items {
		if it.Target != "" && !slices.Contains(out, it.Target) {
			out = append(out, it.Target)
		}
	}
	slices.Sort(out)
	return out
}

// PreviewCard is what a channel is shown of a preview beyond its token's
// header: its problems, targets and parked count, when its messages failed
// by failure group (each group by its id, exception type and counts: the
// group's text is left out) and how returns would be found. The token
// keeps it so that a replica that did not make the preview can render it
// whole, as the bot does when it edits a preview into its replay's status.
type PreviewCard struct {
	Problems []Problem    `json:"problems,omitempty"`
	Targets  []TargetView `json:"targets,omitempty"`
	Parked   int          `json:"parked,omitempty"`
	Arrivals *Arrivals    `json:"arrivals,omitempty"`
	Returns  ReturnsView  `json:"returns"`
}

// CardOf returns the card of p, its failure groups without their texts.
func CardOf(p *Preview) *PreviewCard {
	c := &PreviewCard{Problems: p.Problems, Targets: p.Targets, Parked: p.Parked, Returns: p.Returns}
	if p.Arrivals != nil {
		a := *p.Arrivals
		a.Groups = make([]ArrivalRow, len(p.Arrivals.Groups))
		for i, g := range p.Arrivals.Groups {
			g.Key = ""
			a.Groups[i] = g
		}
		c.Arrivals = &a
	}
	return c
}
