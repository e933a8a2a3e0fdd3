// Package ops is dlqbot's one operations layer: every front end — the
// Slack bot (bot/), the terminal (cmd/dlqbot), the HTTP API (api/) and,
// through the API's Service, the MCP tools (mcp/) and the dashboard —
// turns its input into a Caller and typed values, calls one operation
// here, and words the outcome in its own idiom. No front end decides who
// may do what.
//
// Each operation applies the whole policy (commands.Policy): the grants
// (read, replay, publish on queue globs), the four-eyes rule comparing
// principals rather than identity strings (a preview made as
// terminal:alice is approved by Slack's U012ALICE only when the policy
// does not map both to one person), "needs a human" as a property of a
// caller, the four-eyes threshold counted per requester and DLQ over a
// window, and a rate limit on scans per principal and DLQ. It returns a
// typed result, or a *Refusal whose Code says why nothing was done, or an
// error when an allowed operation failed. Every operation is recorded
// once in the audit trail (audit.Recorder), done, refused or failed,
// with the preview token only as its audit.TokenRef. An operation that
// changes something (approve, discard, resume, resend, cancel, park,
// snooze; and pause) first appends a begun entry once the policy allowed
// it, and takes effect only when that entry was written: one whose entry
// cannot be written does not happen, except pause, the brake, which goes
// through with an Error line. A preview changes nothing and has no begun
// entry.
//
// Where a refusal has more than one reason, the one no other caller could
// get past decides: a spent or expired token, then a DLQ that is gone,
// then the grants, then the four-eyes rule. ListDLQs checks `read` per
// DLQ and only counts the others: nothing about them, not even their
// arrivals or failure groups, is read.
//
// The workers ask the same policy again before a replay sends anything
// (AuthorizeRun, the engine's Authorizer): an approval or resume written
// by a process that applied no policy, or another one, is refused there.
// Config.RequireHuman holds there too, judged from what the record tells
// (who, and the front end an approval came through): an automation
// principal's approval or resume, or an approval through the HTTP API or
// MCP, is refused.
//
// The DLQ watch (watch.go, its per-DLQ depth samples in watch_track.go,
// the Snooze button in watch_snooze.go, the failure groups it names in
// watch_groups.go) samples every queue's depth once
// a tick, from the management API's queue list (never a message), and
// posts one alert when a DLQ the policy's watch: section names grows by
// its threshold within its window; later arrivals edit it, and a DLQ back
// at its baseline resolves it, naming the replays that ran meanwhile. An
// alert names the top failure groups (id and type) the DLQ's latest
// preview of the whole DLQ saw, and when: the watch reads no message.
// Every replica runs one; each transition is won by one replica in the
// AlertStore (Redis), so each alert is posted once.
//
// Without a policy (DLQBOT_ACCESS=open) every grant is allowed and no
// second person is required; the rate limit and "needs a human" still
// apply.
//
// Files:
//
//	ops.go        Config, Deps and New; the ports it calls (Engine, Tokens,
//	              Replays, Windows, Asker, ...)
//	caller.go     Caller: who calls, through which front end, proved how
//	preview.go    Preview and Samples
//	details.go    PreviewDetails, a preview's mechanics, as every front end shows them
//	approve.go    Approve, RequestApproval and Discard
//	replays.go    Replay, List, Control, Check and Park
//	follow.go     Follow, the `read` to follow a replay's progress
//	handoff.go    HandOff, the terminal's hand-off of a replay it approved or
//	              resumed to the running workers (or none: it runs it)
//	dlqs.go       ListDLQs, why each queue is listed, its arrivals (the
//	              ArrivalCounter port) and top failure group
//	audit.go      AuditVisible, which audit entries a caller may see
//	authorize.go  AuthorizeRun, the worker's own check before it sends
//	policy.go     the grants, the four-eyes rule, needs-a-human, the scan limit
//	record.go     recording each operation in the audit trail: begun
//	              before its effect, its outcome after
//	refusal.go    Refusal and its Codes, and Classify: the one table from
//	              an engine or policy error to a refusal's sentence
//	previews.go   PreviewCache, the previews a front end made or posted here
package ops
