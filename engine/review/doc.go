// Package review owns what dlqbot does before and after a replay runs:
// previews of a DLQ (docs/design.md "Reading a DLQ without changing it"),
// the approval that binds a preview to a replay, the check that answers
// "did the replay work?", parking, and the control of a replay's state
// (pause, resume, cancel). Its Service holds a Base: the configuration
// and the ports (Config, Deps, New) and the helpers that package
// engine/replay's Service shares to run the replays themselves; review
// never sends a replay's copies. Config holds what production and other
// packages' tests set; its Tune (package engine/internal/tune's Knobs)
// holds the knobs only the engine's own tests turn, which nothing outside
// engine/ can set.
//
// New requires every port production always sets (Broker, Tokens,
// Ledger, Replays, Leases, Mover, Counters, Consumers, Watches, Schedule,
// Taps, Returns, Claims and TapGaps) and names the first one missing;
// Clock, Notifier, ScanObserver, Jobs, Registry and Redactor are optional,
// and Deps says what their absence costs. Every port is given to New: none
// is set afterwards, and only the mover's cursor support
// (engine.CursorMover) is discovered, by a type assertion.
//
// Where each part lives:
//
//	service.go        Config, Deps, New, the Service and the Base it
//	                  shares with package engine/replay
//	preview.go        a preview, from one read of the DLQ; the first step's
//	                  canary, the returns view and what the token freezes;
//	                  preview_rows.go its rows, preview_targets.go its
//	                  targets and their consumers, preview_summary.go its
//	                  counts and problems
//	redaction.go      what a preview shows of a message, redacted
//	budget.go         a preview's read budget (quorum DLQs)
//	approve.go        approving a token: what changed since (Compare),
//	                  Approve, the replay ids under a token and the hand-off
//	                  to the workers
//	approve_items.go  an approval's view of its preview's items
//	approve_others.go what other replays did with the previewed ids
//	approve_own.go    the claims that count at an approval and taking over
//	                  what lapsed replays held
//	proof_ports.go    package proof's Prover served by the engine's ports
//	readers.go        dlqbot's own readers of a DLQ (previews, checks), and
//	                  waiting for a DLQ to be quiet
//	check.go          the check; check_tap.go the check from the tap's
//	                  record and its reconcile of the windows without it
//	scheduler.go      the follow-up checks due
//	control.go        the desired state (pause, resume, cancel, resend)
//	worker.go         resume, pause, cancel and Status of a replay
//	reaper.go         replays whose owner died, announced as interrupted
//	park.go           moving copies at the park limit to a parking queue
//	taps.go           the taps' records: returns drained from a tap, a tap
//	                  declared again, the windows without one
//	ledger.go         reading a replay's ledger in pages
//	logthrottle.go    errors that keep happening, logged once in a while
package review
