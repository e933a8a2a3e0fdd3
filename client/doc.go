// Package client is a thin typed client of dlqbot's HTTP API
// (api/openapi.yaml): the terminal and `dlqbot mcp` use it when they speak
// to a dlqbot server (DLQBOT_SERVER, DLQBOT_TOKEN) instead of holding the
// broker's and Redis's credentials and the signing key themselves.
//
// Files:
//   - client.go: Client and its calls, one per endpoint; a refusal comes
//     back as *api.Error with the server's HTTP status and code.
//   - events.go: Events, the replay event stream (server-sent events).
//   - client_test.go: the stream and the refusals against a stand-in server.
package client
