// Package mcp exposes dlqbot to AI agents as Model Context Protocol tools,
// on the official MCP Go SDK: dlq_preview, dlq_replay, dlq_status,
// dlq_pause, dlq_cancel and dlq_check. `dlqbot mcp` serves them over stdio;
// `dlqbot serve` serves them at /mcp (streamable HTTP) behind the HTTP
// API's bearer tokens.
//
// Every tool goes through the same operations as the HTTP API
// (api.Service), hence the same engine calls and permission checks, for
// the calling principal; `dlqbot mcp` as a client of a dlqbot server
// calls that server's HTTP API instead (Service, in service.go). The safety contract is stated in the tool
// descriptions: a preview changes nothing; a replay needs the token of a
// preview and never takes a selection, so exactly the previewed messages
// are sent, in canary steps that stop by themselves. With
// Config.RequireHuman, dlq_replay does not start the replay: it posts the
// preview to Slack for a person's Approve and says it is waiting.
//
// Files:
//
//	service.go    Service, what the tools call
//	tools.go      Config, NewServer and the tools
//	transport.go  Handler and Serve: the tools over HTTP and stdio
package mcp
