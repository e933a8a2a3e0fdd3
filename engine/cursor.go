package engine

import (
	"time"
)

// A replay reads its DLQ once, not once per step. Its steps pick in DLQ
// order (plan.next), so one read, a Cursor, serves them all: each step's
// move continues from where the last one stopped, and what the read passed
// without taking stays held unacknowledged by it — invisible to other
// reads, in its place in the DLQ — instead of being given back and read
// again by the next step. The cursor gives everything it holds back, in
// order, when it is bounded:
//
//   - it holds more than Config.Tune.CursorHold messages (by default the
//     larger of DefaultCursorHold and the preview's depth, see holdBound);
//   - it has been open for Config.Tune.CursorAge (half of RabbitMQ's default
//     consumer_timeout of 30 minutes, past which the broker closes a
//     channel holding an unacknowledged delivery), or the next settle
//     could take it past that;
//   - its read ended and no message it holds is wanted any more;
//   - a step did not find all its picks (they are then looked for by the
//     one-shot reads of engine/replay/account_find.go, which must not take dlqbot's own
//     cursor for another client holding messages);
//   - a resend of copies in doubt, which reads the DLQ afresh;
//   - another dlqbot replay seeks messages of the DLQ, during a step's
//     sends too (engine/replay/giveway.go: the step opens a new cursor once it has);
//   - a pause, a stop, a cancel, a lost lease, a shutdown or the end.
//
// A paused or stopped replay therefore holds nothing. The next step after
// a release opens a new cursor at the head of the DLQ. A replay without a
// tap (ReturnsReread) finds returns with its cursor too (engine/replay/settle_tail.go):
// its cursor is not released when its read ends, since it goes on seeing
// what arrives at the DLQ's tail. When the cursor cannot tell, the run
// releases it before it re-reads the DLQ, whose read would otherwise wait
// for the cursor's consumer and could not see what it holds. And a step
// of such a replay that begins while another dlqbot replay reads the DLQ
// reads without a cursor (rn.beside): its returns are then found by
// re-reading the DLQ (the tail would take what the other replay gives
// back), and a cursor would only hold, between those re-reads and the
// other replay's, what both must see whole.

// Cursor defaults.
const (
	// DefaultCursorHold is the least of Config.Tune.CursorHold's default (see
	// holdBound).
	DefaultCursorHold = 250000
	// DefaultCursorAge is the default of Config.Tune.CursorAge: half of
	// RabbitMQ's default consumer_timeout (30 minutes).
	DefaultCursorAge = 15 * time.Minute
)

// holdBound is the most messages a cursor may hold: hold when it is set
// (Config.Tune.CursorHold > 0), else the larger of DefaultCursorHold and reach,
// how deep the replay's preview read (one past its last previewed
// message). The preview held every message it read until its read ended,
// so a cursor within reach holds no more than the broker already held for
// it; a smaller bound would make a sparse selection's later steps release
// and re-read the DLQ from its head, each one as deep as the bound (10% of
// 1,000,000 passes 900,000 messages it does not take).
func HoldBound(hold, reach int) int {
	if hold > 0 {
		return hold
	}
	return max(DefaultCursorHold, reach)
}

// The tap sees every dead letter that reaches the DLQ through its
// bindings; one published straight to the DLQ (a framework republishing
// through the default exchange) passes it by. The bypass check compares
// how much a classic DLQ grew with how many dead letters its tap recorded
// meanwhile: more growth means something the tap cannot see, and the run
// then re-reads the DLQ for returns (checkBypass).
//
// The check's baseline is the run's, carried across steps (bypassBase):
// read once, before the first step publishes, and again after each check.
// Reading the DLQ's count until it holds still costs up to a second while
// the broker refills the cursor's windows, so the check is not made at
// every step: every canary step (smaller than the cap) is checked, then a
// step at most every Config.Tune.BypassEvery, and always the run's last judgement
// (lastLookPatience). Past the canary phase a bypass is therefore seen
// within Config.Tune.BypassEvery of its first return (docs/design.md "Finding
// returns: the tap").

// DefaultBypassEvery is Config.Tune.BypassEvery's default: how long, past the
// canary phase, a run goes between bypass checks.
const DefaultBypassEvery = 10 * time.Second

// tailKeep is the most planned copies a look may read past to reach the
// DLQ's tail: the cursor keeps them, bodies included, in memory for the
// steps that send them (some 100 MB of 1 KB messages). A plan with more
// left re-reads the DLQ for returns instead.
const TailKeep = 100000
