// Package blocks renders dlqbot's engine views as Slack Block Kit messages:
// previews with their Approve and Discard buttons, the replay progress
// message with its Pause, Resume and Cancel buttons, "what changed since the
// preview", the follow-up check report with its Park button, and the one-line
// thread replies and activity-channel entries.
//
// Every renderer is a pure function: it reads only its arguments (the
// current time is passed in where it matters), performs no I/O and returns
// the blocks together with a plain-text fallback for notifications. Free
// text from the broker or from users (queue names, exception texts,
// payloads) is escaped for mrkdwn and shown in code formatting, so it can
// neither mention anyone nor break the layout.
//
// A preview's card is short: the verdict, the problems one line each, the
// selection on one line, the failure groups one line each, the targets a
// problem line does not name; the per-group and per-target figures and
// the mechanics are behind its Details button (PreviewDetails).
//
// A thread reply gives a step's counts once, with only what else the
// engine observed; an activity line names the replay, its DLQ, its state
// and the one count that matters for it.
//
// A replay's outcome is one line (Outcome, outcome.go) built on its
// verdict (engine.Replay.Verdict): the progress message's head, the outcome
// line posted in the channel, and the status line an approved preview leads
// with (PreviewStatus), each with links to the thread and the dashboard.
// The words for quantities are the glossary's (commands.Glossary);
// vocabulary_test.go keeps their synonyms out of this package, the
// dashboard's templates and the terminal's printer.
//
// What a whole channel sees of a failure is an allowlist (View, view.go):
// a renderer of a channel post names a failure group by its type and id
// (ChannelView) and never reaches its text; the group texts, examples'
// exceptions and every target go only to a reader's private reply
// (PrivateView, Samples).
//
// Slack does not enforce its Block Kit limits on the client side, and
// neither does slack-go: a message over a limit is rejected as a whole. The
// renderers therefore cap every list ("and N more") and truncate every text
// ("…") so that any input, however large, yields a valid message; the
// tests check every rendering against the limits (limits.go lists them,
// validate_test.go checks them) with inputs far beyond any real DLQ.
//
// Files:
//
//	preview.go   a preview's card, approved or discarded; targets.go its
//	             targets; samples.go its sample messages; arrivals.go its
//	             arrivals and the buttons that preview a group or the
//	             copies back
//	details.go   what the card leaves out, behind its Details button
//	changes.go   what changed since a preview, at approval
//	progress.go  a replay's progress message; events.go its thread replies
//	             and activity lines; outcome.go its outcome line
//	check.go     a check's report, park results and errors
//	alert.go     a DLQ watch alert: open with its Preview and Snooze 1h
//	             buttons, resolved, or snoozed; counts and a sparkline only
//	actions.go   the action and block ids of every button
//	view.go      who a rendering is for (View)
//	shared.go    requesters, approvers and replay lines
//	text.go      escaping, clipping and code formatting of free text
//	limits.go    Slack's Block Kit limits
package blocks
