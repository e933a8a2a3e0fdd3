package engine

import (
	"context"
	"fmt"
	"time"
)

// State is a replay's lifecycle state (these exact words appear in the API, the JSON output and the
// terminal: keep them).
type State string

// Replay states.
const (
	StateQueued      State = "queued"
	StateRunning     State = "running"
	StatePaused      State = "paused"
	StateStopped     State = "stopped"
	StateCancelled   State = "cancelled"
	StateFinished    State = "finished"
	StateInterrupted State = "interrupted"
)

// Terminal reports whether no more messages can be sent in state s without
// a new decision (stopped and paused can be resumed; the rest are final).
func (s State) Terminal() bool {
	return s == StateCancelled || s == StateFinished || s == StateInterrupted
}

// Yields reports whether a replay in state s gives up what it owns and has
// not sent to a newer approval that overlaps it: a stopped replay sends
// nothing until someone resumes it, and a newer approval of a newer
// preview is that someone's decision; an ended one sends nothing more.
// Queued, running and paused replays keep what they own (a paused one
// gives it up only to an approval with Params.TakeOver).
func (s State) Yields() bool { return s == StateStopped || s.Terminal() }

// Params are a replay's tunables (docs/design.md "Replaying: confirm, record, then ack"); zero values mean the defaults.
type Params struct {
	Step    int           `json:"step"`    // first step size (default 10)
	Cap     int           `json:"cap"`     // largest step (default 500)
	Rate    float64       `json:"rate"`    // messages per second (default 50; <0 = unpaced)
	Timeout time.Duration `json:"timeout"` // step settle timeout (default 60s)
	// TakeOver, at approval only, makes the new replay send the previewed
	// messages another running, paused or stopped replay owns (and has
	// not sent or claimed for the step it is sending): that replay then
	// leaves them, "taken over by r_…". Without it the new replay leaves
	// them to their owner. Json "take_over".
	TakeOver bool `json:"take_over,omitempty"`
	// Auto paces to the targets' consumers (rate=auto, pacer.go), never
	// above Max (default DefaultAutoMax); Rate is then the fixed rate used
	// while the consumers cannot be measured (none, or not inspectable).
	// The default when no rate is given. Json "auto", "max".
	Auto bool    `json:"auto,omitempty"`
	Max  float64 `json:"max,omitempty"`
}

// Failure is one message a replay could not deliver or that came back.
type Failure struct {
	ID     string      `json:"id"`
	Target string      `json:"target,omitempty"`
	Kind   FailureKind `json:"kind"`
	Reason string      `json:"reason,omitempty"` // new dead-letter reason or broker reply
	Detail string      `json:"detail,omitempty"` // exception text, if any
	// GroupID is a returned copy's failure group (see GroupID), the id
	// check groups it under; "" when not known.
	GroupID string `json:"group_id,omitempty"`
}

// Replay is a replay's record in the store, readable from any process.
type Replay struct {
	ID        string `json:"replay_id"`
	Token     string `json:"token"`
	DLQ       string `json:"dlq"`
	Vhost     string `json:"vhost"`
	Requester string `json:"requester"`
	Approver  string `json:"approver"`
	// ApprovedVia is the front end the approval came through ("slack",
	// "terminal", "api", "mcp", "dashboard"), as the approving caller's
	// front end named itself: a label to show, never a reason to let a
	// replay run; a worker requiring a person refuses by it (a front end
	// no person is proved through). Empty in a record approved without
	// one.
	ApprovedVia string `json:"approved_via,omitempty"`
	State       State  `json:"state"`
	Params      Params `json:"params"`

	Total    int `json:"total"`    // messages in the frozen multiset
	Sent     int `json:"sent"`     // confirmed copies
	Settled  int `json:"settled"`  // sent copies observed to have left the target
	Returned int `json:"returned"` // copies dead-lettered again
	Missing  int `json:"missing"`  // previewed messages no longer in the DLQ
	Failed   int `json:"failed"`   // copies the broker did not take (unroutable, nacked); originals kept
	// Duplicates counts copies sent whose originals could not be acked (a
	// lost connection), or whose send the ledger could not record after the
	// broker confirmed it: those originals are back in the DLQ, and the
	// ledger lists them (confirmed, or pending when unrecorded), so they are
	// never sent again. After a lost connection a counted read of the DLQ
	// makes it exact (see Unreconciled): the confirmed copies whose
	// originals the DLQ holds.
	Duplicates int `json:"duplicates,omitempty"`
	// DuplicatesAcked counts originals of confirmed copies a later run
	// acked without sending them again (the acks a lost connection did
	// not carry): no longer in Duplicates. Json "duplicates_acked".
	DuplicatesAcked int `json:"duplicates_acked,omitempty"`
	// InDoubt counts copies in flight when the connection was lost: the
	// broker never confirmed them, so they may or may not have been
	// delivered. Their originals stay in the DLQ and are never sent again.
	InDoubt int `json:"in_doubt,omitempty"`
	// InDoubtTaken counts, of InDoubt, the copies whose originals the last
	// counted read of the DLQ (engine/replay/reconcile.go) did not find: something else
	// took them from the DLQ, so they cannot be sent again. Json
	// "in_doubt_taken".
	InDoubtTaken int `json:"in_doubt_taken,omitempty"`
	// CountStale is set when a resumed run could neither prove that
	// nothing left the DLQ since Duplicates and InDoubt were counted nor
	// count them again (a DLQ whose reads spend delivery attempts:
	// engine/replay/recount.go): what they say of the DLQ's originals is then as of the
	// last count, and the replay's words say so. Json "count_stale".
	CountStale bool `json:"count_stale,omitempty"`
	// Resent counts copies in doubt sent again (resume resend=in-doubt),
	// each with PossibleDuplicateHeader: they are in Sent, and a consumer
	// may have received each twice (the first copy and the resend).
	Resent int `json:"resent,omitempty"`
	// Pace is what an auto-paced replay's pacer does and why, as of its
	// last sample ("pacing to the consumer: 48 msg/s; backlog 30"). Json
	// "pace".
	Pace string `json:"pace,omitempty"`
	// Unreconciled is set when a run lost its broker connection after
	// sending, and cleared once a counted read of the DLQ made Duplicates
	// and InDoubt equal what the broker holds (engine/reconcile.go); the
	// next run reads the DLQ first while it is set.
	Unreconciled bool `json:"unreconciled,omitempty"`
	// Unverifiable marks, in a list, a record that failed its check (its
	// signature, version or side fields): only its ID is known, nothing
	// else of it is to be trusted. Set by a store's List, never stored.
	Unverifiable bool `json:"unverifiable,omitempty"`
	// Withdrawn marks a replay cancelled by its own approval, which could
	// not be completed before anything ran: its token may be approved
	// again (under the token's next replay id, approve.go).
	Withdrawn bool `json:"withdrawn,omitempty"`
	// CountMark is what the run that stopped with Duplicates or InDoubt
	// counted saw of the DLQ, so that the next run counts them again only
	// when something may have left the DLQ since (engine/recount.go); nil
	// when none could be taken. Json "count_mark".
	CountMark *CountMark `json:"count_mark,omitempty"`
	// ResendInDoubt is set by resume resend=in-doubt and cleared by the
	// run once every copy in doubt was sent again.
	ResendInDoubt bool `json:"resend_in_doubt,omitempty"`
	// Elsewhere counts previewed messages another dlqbot replay sent or
	// is sending (Failures name it, "replayed by r_…"): not sent by this
	// one, not missing. Json "replayed_elsewhere".
	Elsewhere int `json:"replayed_elsewhere,omitempty"`
	// TookOver counts, per replay, the previewed messages this replay
	// took over from it at its approval (Params.TakeOver). Json
	// "took_over".
	TookOver map[string]int `json:"took_over,omitempty"`
	// TakenFrom counts, per replay, the previewed messages this replay's
	// approval took over, without a confirm step, from a replay that had
	// stopped or ended (State.Yields) and had not sent them. Json
	// "taken_from".
	TakenFrom map[string]int `json:"taken_from,omitempty"`
	// LeftTo counts, per replay, the messages this replay owned and had
	// not sent that a later approval took over while this one was stopped
	// or ended (the other's TakenFrom): resumed, it does not send them.
	// Json "left_to".
	LeftTo map[string]int `json:"left_to,omitempty"`
	// OwnFrom is the first item of the frozen preview the approval did not
	// own (0: it owned them all): its runs own the rest beside their steps
	// (engine/review/approve_own.go).
	OwnFrom int `json:"own_from,omitempty"`
	// NewFailures counts messages dead-lettered since the replay started
	// that do not carry its id (failures that are not returns).
	NewFailures int `json:"new_failures"`
	// Unsettled counts, per target queue, the copies sent and not yet
	// seen leaving it (engine/replay/settle_unjudged.go): a replay finishes only when
	// none are left. Json "unsettled".
	Unsettled map[string]int `json:"unsettled,omitempty"`
	// Unjudged is the step a pause, cancel, stop or shutdown ended after
	// it sent and before it was judged: the next run judges it first and
	// posts its line. Json "unjudged".
	Unjudged *UnjudgedStep `json:"unjudged,omitempty"`
	Step     int           `json:"step"` // current step number, from 1
	// ReturnsMode is how the last run found returns: "tap" or "reread".
	ReturnsMode ReturnsMode `json:"returns_mode,omitempty"`
	// Unseen, when set, names the copies whose return could not be told:
	// the DLQ's tap was gone for a while and the DLQ could not be re-read
	// in its place (engine/replay/tap_watch.go). Returned then counts what was seen.
	Unseen *Unseen `json:"unseen,omitempty"`
	// ReturnsUnverified, when set, says why the tap's record of this
	// replay's returns could not be trusted (its counts were lowered or
	// deleted in Redis, its floor forged: store refuses such a record). The
	// replay then never claims that nothing came back: Returned counts
	// what was seen before, and its verdict is could_not_tell unless
	// copies came back. Json "returns_unverified".
	ReturnsUnverified string `json:"returns_unverified,omitempty"`

	Failures []Failure `json:"failures,omitempty"`
	// Note is the last human-readable reason for the state (why it stopped,
	// what was interrupted).
	Note string `json:"note,omitempty"`
	// RestSelection is, for an interrupted replay, the selection of the
	// preview it came from, in the command grammar without the command
	// name ("orders.dlq reason=rejected"): previewing it again shows what
	// is left. Renderers add their own command name. Empty when unknown.
	RestSelection string `json:"rest_selection,omitempty"`

	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// (Where a replay shows in Slack is the Slack front end's own record,
	// bot.SlackRefs, not part of the replay.)
}

// Replays stores replay records. Writes by the running owner are fenced:
// they succeed only while owner holds the lease at epoch.
type Replays interface {
	// Create stores a new replay; it fails if the id exists.
	Create(ctx context.Context, r Replay) error
	// Get returns a replay; ErrReplayNotFound when unknown.
	Get(ctx context.Context, id string) (Replay, error)
	// Put overwrites r if owner still holds r.ID's lease at epoch;
	// ErrLeaseLost otherwise.
	Put(ctx context.Context, r Replay, owner string, epoch int64) error
	// Desired returns the last desired state and who asked for it (""
	// when none).
	Desired(ctx context.Context, id string) (State, string, error)
	// Active lists the replays not in a final state, so that the reaper
	// need not read every replay kept.
	Active(ctx context.Context) ([]string, error)
	// UpdateUnowned changes a record only while nobody holds the lease,
	// atomically (optimistic locking): fn sees the current record and may
	// change it; an error from fn (such as ErrNoChange) leaves it as it is
	// and is returned.
	UpdateUnowned(ctx context.Context, id string, fn func(*Replay) error) error
	// DesireIf records the state an operator asked for (paused, running,
	// cancelled) only when the replay's state is one of from, atomically
	// with the check; the owner polls Desired.
	DesireIf(ctx context.Context, id string, want State, by string, from ...State) (DesireResult, error)
	// Yield is the owner's last write of a run that leaves the replay
	// resumable: record, desired state and lease release in one atomic
	// step, refused with ErrDesireChanged when the desired state became
	// one of unless.
	Yield(ctx context.Context, r Replay, owner string, epoch int64, desired State, unless ...State) error
}

// Leases hold replay ownership (docs/design.md "Workers, leases and what survives
// a crash").
type Leases interface {
	// Acquire takes replayID's lease for owner if free and returns the new
	// epoch (a fencing token that only grows).
	Acquire(ctx context.Context, replayID, owner string, ttl time.Duration) (epoch int64, ok bool, err error)
	// Extend renews the lease if owner still holds it; ErrLeaseLost otherwise.
	Extend(ctx context.Context, replayID, owner string, ttl time.Duration) error
	// Release frees the lease if owner holds it.
	Release(ctx context.Context, replayID, owner string) error
	// Owner tells who holds replayID's lease ("" when nobody does).
	Owner(ctx context.Context, replayID string) (string, error)
}

// Defaults for Params.
const (
	DefaultStep    = 10
	DefaultCap     = 500
	DefaultRate    = 50.0
	DefaultTimeout = 60 * time.Second
)

// withDefaults fills zero fields with the defaults.
func (p Params) WithDefaults() Params {
	if p.Step <= 0 {
		p.Step = DefaultStep
	}
	if p.Cap <= 0 {
		p.Cap = DefaultCap
	}
	if p.Cap < p.Step {
		p.Cap = p.Step
	}
	if p.Rate == 0 {
		// No rate given: pace to the consumer, at DefaultRate while it
		// cannot be measured.
		p.Rate = DefaultRate
		p.Auto = true
	}
	if p.Rate < 0 {
		p.Auto = false // rate=max: unpaced
	}
	if p.Timeout <= 0 {
		p.Timeout = DefaultTimeout
	}
	return p
}

// A run that begins with duplicates or copies in doubt counted (a resume
// after a lost connection) says what the DLQ holds of their originals:
// "their originals also still in the DLQ", "originals stay in the DLQ".
// Another reader may have taken some of them since the last count, so the
// run counts them again before it sends (reconcile) unless the broker
// proves that nothing left the DLQ meanwhile:
//
//   - the run that stopped after the count marks the DLQ (CountMark): its
//     exact ready count and its management ack counter, in a sample taken
//     StatsLag after the run's last read;
//   - the next run takes the same from a sample StatsLag newer than its
//     start: when both agree, nothing acked a message of the DLQ and none
//     left it otherwise (a purge, an expiry), and the counts stand.
//
// Without the proof the run counts again, but never on a DLQ whose reads
// spend delivery attempts (a quorum queue with a delivery limit before
// RabbitMQ 4.3): those are owed to moving messages, the rest of the replay
// and a later resend of the copies in doubt. There the counts stand as the
// last count left them and the replay's words say "at the last count"
// (Replay.CountStale).

// CountMark is what a run that stopped with duplicates or copies in doubt
// counted leaves for the next run's proof that nothing left the DLQ since.
type CountMark struct {
	// Ready is the DLQ's exact ready count (a passive declare).
	Ready int `json:"ready"`
	// Ack is the DLQ's management ack counter, and SampledAt when the
	// broker took its sample.
	Ack       int64     `json:"ack"`
	SampledAt time.Time `json:"sampled_at"`
}

// Every copy a replay sends is judged: its step watches it leave the
// target queue and looks for it coming back. A step a pause, cancel, stop
// or shutdown ends after it sent and before it was judged is not
// forgotten:
//
//   - the record keeps, per target, the copies sent and not yet seen
//     leaving it (Replay.Unsettled) and the step itself (Replay.Unjudged);
//   - a resumed run judges that step first, before it sends anything, and
//     posts its line like any step's (rejudge);
//   - a cancelled run goes on watching the copies already sent for the
//     step's grace and writes what came back into the cancelled record
//     (windDown), so that the record and a check agree;
//   - a run whose plan is exhausted judges what is still unsettled once
//     more (settleRest), and finishes only when every copy it sent was seen
//     leaving its target with none coming back since its step was judged.

// UnjudgedStep is the step (or the steps, First to Last) a run ended after
// it sent and before it was judged.
type UnjudgedStep struct {
	Step int `json:"step"`
	Last int `json:"last,omitempty"`
	// Sent is how many copies those steps sent (their copies stay in
	// Replay.Unsettled until a judgement sees them leave).
	Sent int `json:"sent"`
	// Returned is the replay's returned count when the first of them began
	// to settle: returns beyond it are the step's.
	Returned int `json:"returned"`
}

// steps words which steps u covers ("step 3", "steps 3–4").
func (u UnjudgedStep) Steps() string {
	if u.Last > u.Step {
		return fmt.Sprintf("steps %d–%d", u.Step, u.Last)
	}
	return fmt.Sprintf("step %d", u.Step)
}
