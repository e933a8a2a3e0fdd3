// Package bot is dlqbot's Slack transport: the signed HTTP
// endpoints POST /slack/commands and POST /slack/interactions, Socket Mode,
// and the Web API calls that post previews, edit them once approved, and
// keep each replay's progress message and thread up to date.
//
// Both transports feed one dispatch layer with a transport-neutral
// request: HTTP verifies the request's signature and timestamp on the raw
// body before anything is parsed (401 otherwise, 400 for a malformed body),
// Socket Mode acks each envelope at once; either way the request is
// acknowledged well within Slack's 3 seconds and the slow work (scans,
// approvals, Slack calls) continues in a goroutine that answers through
// the request's response_url (ephemeral) or the Web API.
//
// Every command and click is one operation of package ops (Deps.Ops),
// which applies the policy and records the audit trail; the bot turns
// Slack's requests into operations and words their outcome.
//
// Errors a person can cause — bad syntax, an unknown queue, a missing
// permission, an expired or used token — are answered ephemerally, change
// nothing and are logged, never posted to the activity channel. Permissions
// (commands.Policy, nil meaning access control is off) are checked on every
// command and every click, for the person clicking.
//
// Notifier (notifier.go) implements engine.Notifier: it is built first
// and given to the engine, then the Bot is built on it and the engine (the
// engine notifies Slack and the bot drives the engine). Progress events
// are queued and sent by a goroutine per replay, so a slow or unreachable
// Slack never slows a replay: the progress message is edited at most once per EditInterval
// (the latest state wins and the final state is never dropped), each step
// result, stop, pause, cancellation, finish and interruption is a short
// reply in the replay's thread, and each lifecycle event is one line in the
// activity channel when the policy allows the replay's DLQ there. The preview a replay was approved from is its status:
// it is edited to lead with the replay's state and verdict whenever either
// changes, and a stop or an end also posts one outcome line in the
// channel; activity and outcome lines link the thread and the dashboard
// (outcome.go). Rate limits (HTTP 429, *slack.RateLimitedError) are
// honoured by waiting Retry-After; other failures are retried with backoff.
//
// The policy's per-DLQ channel allowlists hold for every place a replay
// is shown (showwhere.go), the activity channel's lines included: a
// replay approved where its DLQ is not allowed shows in the activity
// channel instead, or in none, and a DLQ not allowed in the activity
// channel has no line there. What a channel is
// shown of a failure is its type and group id (blocks.ChannelView); its
// text goes to readers only, privately (blocks.PrivateView).
//
// The DLQ watch's alerts (alerts.go) are posted and edited through the
// Notifier (ops.AlertPoster); their Preview button runs the same preview
// as `/dlq preview <dlq>` for the clicker, and Snooze 1h calls the watch.
//
// For the other front ends (package api: the HTTP API and the MCP tools),
// ShowReplay threads a replay approved outside Slack under its preview (or
// in Config.APIChannel) like one approved with the button, and
// RequestApproval posts a preview made outside Slack for a person to
// approve.
//
// Files:
//
//	bot.go           Deps, New and the ports the Bot needs (Tokens,
//	                 SeenRequests; Replays is the Notifier's)
//	config.go        Config and its defaults
//	notifier.go      Notifier and NewNotifier; notify.go queues and sends
//	                 each replay's events; outcome.go its outcome line
//	slackapi.go      posting, editing and retrying Slack Web API calls
//	ratehold.go      a 429's Retry-After held for every call of its method
//	slackrefs.go     where each replay shows in Slack (SlackRefs)
//	showwhere.go     which channels may show a replay
//	http.go          the signed HTTP endpoints; socket.go Socket Mode;
//	                 socket_dedup.go a Socket Mode request seen twice
//	dispatch.go      one request, command or click, to its operation
//	preview.go       previews, their samples and details; buttons.go the
//	                 preview buttons that name a selection
//	approve.go       approving a preview (a click or `replay <token>`)
//	control.go       pause, resume and cancel; check.go check and park
//	status.go        a replay's progress and the list of replays
//	dlqs.go          /dlq list: the DLQs a user may read
//	external.go      replays and approvals asked for by the other front ends
//	perm.go          an operation's refusal or failure worded for a person
//	usergroups.go    Slack user groups, for the policy
package bot
