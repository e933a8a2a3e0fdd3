package engine

import (
	"context"
	"time"

	"github.com/stroma/dlqbot/engine/letter"
)

// ReturnsMode is how a replay finds the copies that came back to its DLQ.
type ReturnsMode string

// Ways of finding returns.
const (
	// ReturnsTap: a tap queue bound like the DLQ receives a copy of every
	// dead letter routed to it; workers record them in the store, and
	// settling, check and the follow-ups read that record (O(returns)).
	ReturnsTap ReturnsMode = "tap"
	// ReturnsReread: the DLQ is fed only through the default exchange, so
	// no tap can see its dead letters: returns are found by re-reading the
	// DLQ (each read costs every message a delivery on a quorum DLQ).
	ReturnsReread ReturnsMode = "reread"
)

// TapState says how returns to one DLQ can be found.
type TapState struct {
	// DLQ is the dead-letter queue.
	DLQ string `json:"dlq"`
	// Queue is the tap queue's name ("" in reread mode).
	Queue string `json:"queue,omitempty"`
	// Mode is tap or reread.
	Mode ReturnsMode `json:"mode"`
	// Bindings is how many bindings (other than the default exchange's)
	// route dead letters to the DLQ, and so to the tap.
	Bindings int `json:"bindings"`
	// Reason says why the mode is reread ("" for tap).
	Reason string `json:"reason,omitempty"`
}

// Taps is the broker side of finding returns without re-reading a DLQ.
type Taps interface {
	// TapState says, changing nothing, which mode applies to dlq.
	TapState(ctx context.Context, dlq string) (TapState, error)
	// EnsureTap declares dlq's tap (bounded by a TTL and a length) and
	// makes its bindings exactly the DLQ's; in reread mode it declares
	// nothing. It must complete before anything is published.
	EnsureTap(ctx context.Context, dlq string) (TapState, error)
	// DrainTap reads the messages in dlq's tap and hands them to record in
	// batches, acknowledging a batch only once record returned nil (an
	// error gives the batch back). It returns when the tap is empty (as
	// far as its ready count tells), with how many messages it recorded.
	// A missing tap is ErrQueueNotFound.
	DrainTap(ctx context.Context, dlq string, record func([]letter.Message) error) (int, error)
	// WatchTap holds a consumer on dlq's tap, handing what arrives to
	// record in batches (each acknowledged once record returned nil, given
	// back otherwise), until ctx ends (it then returns nil). It returns
	// ErrQueueNotFound as soon as the tap is missing: at once when it does
	// not exist, or when the broker cancels the consumer because the tap
	// was deleted. Any other error means its channel closed (the watch may
	// be started again).
	WatchTap(ctx context.Context, dlq string, record func([]letter.Message) error) error
}

// ReturnEvent is one copy of a replay that came back to the DLQ.
type ReturnEvent struct {
	ReplayID    string    `json:"r"`
	ID          string    `json:"i"`
	Source      string    `json:"s,omitempty"`
	Group       string    `json:"g"`
	Type        string    `json:"y,omitempty"` // FailureType
	Reason      string    `json:"n,omitempty"`
	Exception   string    `json:"e,omitempty"`
	ReplayCount int       `json:"c"`
	At          time.Time `json:"t"`
	// Redelivered marks a tap message that may have been recorded before
	// (its consumer died before the ack): it is not counted again when an
	// event of the same id is already recorded.
	Redelivered bool `json:"-"`
}

// ReturnGroup is one failure group among a replay's recorded returns.
type ReturnGroup struct {
	Group   string `json:"group"`
	Count   int    `json:"count"`
	Example ReturnEvent
}

// ReturnRecord is what the store holds about a replay's returns.
type ReturnRecord struct {
	// Tapped is true once the replay's returns are recorded from a tap
	// (the run set a baseline); false means nothing was ever recorded.
	Tapped bool
	// Total counts the copies that came back (events, not a maximum).
	Total int
	// Groups are the returns by failure group.
	Groups []ReturnGroup
	// ReplayCounts are the returns by x-replay-count (for the park limit).
	ReplayCounts map[int]int
	// IDs maps each returned id to its highest x-replay-count.
	IDs map[string]int
	// Events are the first recorded events from index from on (the store
	// keeps the first few hundred).
	Events []ReturnEvent
	// Baseline is the DLQ's tap arrival count when the replay's tap
	// record began.
	Baseline int64
}

// Returns is the store side: what the taps recorded.
type Returns interface {
	// Record stores one batch drained from dlq's tap: returns (copies with
	// a replay id and a new death) per replay, and the number of messages
	// that arrived (returns included).
	Record(ctx context.Context, dlq string, returns []ReturnEvent, arrived int) error
	// Begin marks replayID's returns as recorded from dlq's tap, with the
	// tap's arrival count now as the baseline for new failures; a second
	// call keeps the first baseline.
	Begin(ctx context.Context, replayID, dlq string) error
	// Returned reads replayID's record, with the events from index from.
	Returned(ctx context.Context, replayID string, from int) (ReturnRecord, error)
	// Arrived is how many messages dlq's tap has recorded in all.
	Arrived(ctx context.Context, dlq string) (int64, error)
	// AddTap registers dlq as tapped, so background workers drain it;
	// Tapped lists the registered DLQs.
	AddTap(ctx context.Context, dlq string) error
	Tapped(ctx context.Context) ([]string, error)
	// RemoveTap unregisters dlq (its tap is gone).
	RemoveTap(ctx context.Context, dlq string) error
}

// TapGap is a window in which a DLQ's tap was missing (deleted by an
// operator, a policy, a broker restart): dead letters routed to the DLQ
// then reached no tap, so the tap's record may lack returns of that time.
type TapGap struct {
	// From is when the tap was last known to exist before it went.
	From time.Time `json:"from"`
	// To is when it was declared again; zero while it is still gone.
	To time.Time `json:"to,omitzero"`
}

// Open reports whether the tap is still gone.
func (g TapGap) Open() bool { return g.To.IsZero() }

// Touches reports whether g overlaps the time from since to until (a zero
// until: now, open-ended).
func (g TapGap) Touches(since, until time.Time) bool {
	if !until.IsZero() && g.From.After(until) {
		return false
	}
	return g.Open() || !g.To.Before(since)
}

// TapGaps is the store side of a tap's losses: per DLQ, the windows its
// tap was missing, so that a check of any replay of the DLQ, by any
// process, knows what its tap record cannot have seen.
type TapGaps interface {
	// AddTapGap records a window without dlq's tap. An open gap (To zero)
	// is merged into the gap already open (keeping the earlier From) and
	// ignored when a gap closed at or after its From already covers it
	// (another process saw the same loss and the tap is back); a closed
	// gap closes the open one (keeping the earlier From), else it is added.
	AddTapGap(ctx context.Context, dlq string, g TapGap) error
	// TapGaps lists dlq's recorded gaps, oldest first.
	TapGaps(ctx context.Context, dlq string) ([]TapGap, error)
}

// DefaultTapPoll is how often a worker drains every registered tap.
const DefaultTapPoll = time.Second
