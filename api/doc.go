// Package api is dlqbot's front end for programs: a JSON HTTP API under
// /api/v1/ (the DLQs one may read, previews, approvals, replays, pause/resume/cancel, check, park
// and a server-sent-events stream of a replay's events), and the
// front-end-neutral operations (Service) that the HTTP API and the MCP
// tools (package mcp) share.
//
// Every operation goes through the same engine calls as Slack and the
// terminal — Preview, Approve (with the same what-changed
// re-confirmation), Pause, Resume, Cancel, Status, Check, Park — and the
// same permission checks (commands.Policy), made for the calling
// principal. A principal is named in the permissions file with the
// SHA-256 hash of its bearer token; it acts as "api:<name>", or as the
// Slack user it is mapped to (then it is that user for the four-eyes
// rule). Without a permissions file the HTTP API is off: every call is
// answered 404 with a sentence saying so, never served open.
//
// Errors are *Error values: an HTTP status, a stable code (see the Code
// constants) and a sentence for a person. Bad input is refused before
// anything is read or changed.
//
// Replays approved here are shown in Slack like any other when a Slack
// front end is wired in (the Slack port): progress in the preview's thread
// (or a thread in the API channel), the activity channel naming the
// principal. Each replay's events are appended to a log (the EventLog
// port, a Redis stream) by RecordEvents, so the event stream can follow a
// replay run by any replica.
//
// Files:
//
//	service.go    Config, Deps (the Slack and EventLog ports) and New
//	ops.go        the operations of Service, each a call of package ops
//	http.go       the HTTP API's routes, authentication and JSON bodies
//	errors.go     Error and its Codes: ops' refusals, outages and faults
//	              worded for a client
//	events.go     RecordEvents and the server-sent-events stream
//	audit.go      the audit entries a caller may see, and their filter
//	dashboard.go  what the dashboard needs beyond the operations
//	rate.go       Rate, a replay's rate as a program gives it
package api
