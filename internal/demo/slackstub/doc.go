// Package slackstub is a local stand-in for Slack, for tests and for the
// `dlqbot demo` page. It is an HTTP server (httptest-based: New, URL,
// Close) that
//
//   - implements the Web API methods dlqbot calls, answering with Slack's
//     JSON shapes: auth.test, chat.postMessage (realistic unique ts values
//     such as "1732900000.000100", threads through thread_ts),
//     chat.update, chat.postEphemeral, chat.delete, usergroups.list,
//     usergroups.users.list, the files upload v2 flow
//     (files.getUploadURLExternal, the upload URL itself and
//     files.completeUploadExternal) and apps.connections.open;
//   - records every call (method, arguments, parsed blocks) and keeps each
//     channel's messages, their threads and their current blocks after
//     edits, readable through Messages, Message, Calls, Ephemerals and
//     Files;
//   - injects faults: 429 with Retry-After on the next N calls of a method
//     (RateLimit) or any other status (Fail);
//   - serves response_url endpoints and records what is posted there,
//     honouring Slack's limit of five posts per URL;
//   - signs requests to the bot exactly like Slack (v0 HMAC-SHA256 over
//     "v0:"+timestamp+":"+body in X-Slack-Signature, with
//     X-Slack-Request-Timestamp): SlashCommand and Click build realistic
//     slash-command forms and block_actions payloads;
//   - runs a Socket Mode endpoint (apps.connections.open hands out a
//     websocket URL) on which SocketCommand and SocketClick deliver the
//     same payloads as envelopes and wait for the bot's ack;
//   - serves a Slack-like page at its URL (SetWeb configures it; plain
//     HTML, CSS and JavaScript embedded from static/): channels with their
//     messages, threads and the user's ephemeral messages, Block Kit
//     rendered, an input whose /dlq commands go to the bot as signed slash
//     commands, and buttons whose clicks (after their confirm dialog) go as
//     signed block_actions. The page reads GET /ui/state, which waits for
//     the next change, so edits appear as they happen. Listen starts a
//     stand-in on a chosen address, for `dlqbot demo`.
//
// Everything is kept in memory and is safe for concurrent use.
//
// Files:
//
//	stub.go       Stub, New and Listen: the stand-in's workspace and server
//	methods.go    the Web API methods it answers; records.go what it
//	              recorded (calls, messages, ephemerals, files)
//	response.go   response_url answers
//	sign.go       signed slash commands and clicks sent to dlqbot
//	socket.go     Socket Mode
//	web.go        the page `dlqbot demo` shows a newcomer; web_state.go
//	              what the page shows of channels and threads
package slackstub
