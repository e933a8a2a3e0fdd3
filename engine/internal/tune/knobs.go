package tune

import (
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/proof"
)

// Knobs tune the engine for its own tests (review.Config.Tune). Zero
// values mean the documented defaults.
type Knobs struct {
	// TokenTTL is how long a preview token stays valid (default 24h).
	TokenTTL time.Duration
	// Samples is how many messages a preview shows with a payload excerpt
	// (default 5).
	Samples int
	// ListRows is how many distinct messages a preview lists in full
	// (Preview.Messages, default 20,000, the bot's attached list); the rest
	// are only counted, so a preview of a million messages stays small.
	ListRows int
	// StrictSteps makes every step of every replay settle before the next
	// one sends. By default (false) an unpaced replay that finds returns
	// through its tap lets a step past the canary phase (the doubling
	// steps up to the cap) settle while the next one sends, with at most
	// one such step outstanding and a breaker that stops the sends on
	// returns (engine/replay/settle_overlap.go; docs/design.md "How settling is judged"); paced replays and
	// the canary phase always send, then settle.
	StrictSteps bool
	// BypassEvery is how long, past the canary phase, a run goes between
	// checks that no return reaches the DLQ past its tap (default
	// DefaultBypassEvery; engine/replay/settle_bypass.go). Canary steps and the run's
	// last step are always checked.
	BypassEvery time.Duration
	// Window is the most unconfirmed publishes in flight (default 500).
	Window int
	// StepChunk is the most copies a step claims and moves at once
	// (default DefaultStepChunk): a larger step (cap= the user chose) that
	// reads the DLQ through its cursor is sent in chunks of its picks, one
	// after the other over the same read, so that what a step holds in
	// memory is bounded by the chunk, not the step. The step still settles
	// once, as a whole. A step without a cursor (a resend, or
	// CursorHold −1) is one move: each move would be a read of the DLQ.
	StepChunk int
	// StatsLag is how long after a step's confirm a management sample must
	// be taken before its counters serve as a baseline: the broker's
	// statistics interval plus a margin (default 6s, for RabbitMQ's 5s).
	StatsLag time.Duration
	// HeldWait bounds how long a step waits for another client holding
	// messages of the DLQ to let go before it reports the planned messages
	// it could not find as held elsewhere (default 60s).
	HeldWait time.Duration
	// KeepReads lets an approval that compares keep its read of a classic
	// DLQ for the run of the replay it approves, which then reads the
	// DLQ no more (engine.ReadKeeper; docs/design.md "The compare's read,
	// kept for the run"). Set it where that run follows the approval in
	// the same process — the terminal, which runs the replay itself or
	// gives the read back as it hands the replay to workers. Default
	// false: the read is given back at once, as for a run elsewhere.
	KeepReads bool
	// CompareAlways makes every approval read the DLQ to compare it with
	// the preview, even when the broker's counts prove nothing left it
	// (package proof); default false. For benchmarks of the old path.
	CompareAlways bool
	// ProofWait is the most an approval waits for the DLQ's management
	// statistics to catch up with its preview before it compares instead
	// (package proof): default 2m. It waits no longer than twice the
	// preview's read took (about what the compare costs), and at least
	// three times StatsLag (the sample must be StatsLag newer than the
	// approval's start).
	ProofWait time.Duration
	// OwnAtApproval is how many previewed messages an approval owns itself
	// before it returns; its replay's runs own the rest beside their first
	// steps (engine/review/approve_own.go). Default 10,000.
	OwnAtApproval int
	// ProofFrom is the fewest messages a previewed DLQ holds for its
	// approval to try the statistics' proof (package proof) instead of
	// comparing: below it a compare reads the DLQ sooner than the proof's
	// statistics catch up, and is exact where the proof has a blind spot
	// (acks the statistics have not shown yet). A watch opens from
	// proof.WatchFrom (20,000) or ProofFrom, whichever is fewer. Default
	// 100,000.
	ProofFrom int
	// Reconnect bounds how long a paced replay that lost its broker
	// connection (its node died or was restarted) waits for the broker
	// through another node, and then for the messages its reader held
	// through the lost one, before it stops, resumable (default 5m; see
	// engine/replay/reconnect.go). Negative: stop at once, as an unpaced replay does.
	Reconnect time.Duration
	// CursorHold is the most messages a replay's cursor (one read of the
	// DLQ across its steps, see engine/cursor.go) holds unacknowledged before it
	// gives them back (default: DefaultCursorHold, or how deep the
	// replay's preview read when that is more, so that the cursor never
	// holds more than the preview's own read did; negative: no cursor,
	// every step reads the DLQ from its head).
	CursorHold int
	// CursorAge is the longest a replay's cursor stays open (default
	// DefaultCursorAge, half of RabbitMQ's default consumer_timeout).
	CursorAge time.Duration
}

// WithDefaults returns k with every knob left at its zero value set to its
// default (CursorHold's stays 0: engine.HoldBound reads 0 as its default).
func (k Knobs) WithDefaults() Knobs {
	if k.TokenTTL <= 0 {
		k.TokenTTL = 24 * time.Hour
	}
	if k.Samples <= 0 {
		k.Samples = 5
	}
	if k.ListRows <= 0 {
		k.ListRows = 20000
	}
	if k.Window <= 0 {
		k.Window = 500
	}
	if k.StepChunk <= 0 {
		k.StepChunk = engine.DefaultStepChunk
	}
	if k.Reconnect == 0 {
		k.Reconnect = 5 * time.Minute
	}
	if k.HeldWait <= 0 {
		k.HeldWait = 60 * time.Second
	}
	if k.BypassEvery <= 0 {
		k.BypassEvery = engine.DefaultBypassEvery
	}
	if k.CursorAge <= 0 {
		k.CursorAge = engine.DefaultCursorAge
	}
	if k.StatsLag <= 0 {
		k.StatsLag = 6 * time.Second
	}
	if k.ProofWait <= 0 {
		k.ProofWait = 2 * time.Minute
	}
	if k.ProofFrom <= 0 {
		k.ProofFrom = proof.DefaultFrom
	}
	if k.OwnAtApproval <= 0 {
		k.OwnAtApproval = engine.DefaultOwnAtApproval
	}
	return k
}
