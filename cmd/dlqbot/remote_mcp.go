package main

import (
	"context"
	"fmt"
	"io"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/mcp"
	"github.com/stroma/dlqbot/ops"
)

// mcpClient is `dlqbot mcp` as a client of a dlqbot server: the MCP tools
// on stdio, each a call of the server's HTTP API as the principal of
// DLQBOT_TOKEN. It holds no broker or Redis credentials and no signing
// key; the server decides everything, needing a human included (its
// approval then refuses with needs_human, and dlq_replay asks the server
// to post the preview in Slack for a person).
func mcpClient(ctx context.Context, cfg config, stderr io.Writer) error {
	log := zerolog.New(stderr).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	svc := remoteMCP{newRemote(cfg, ops.FrontMCP)}
	log.Info().Str("server", cfg.Server).Msg("dlqbot mcp on stdio, through the dlqbot server")
	if err := mcp.Serve(ctx, svc, mcp.Config{}, api.Caller{FrontEnd: ops.FrontMCP}, &sdk.StdioTransport{}, log); err != nil && ctx.Err() == nil {
		return failed(fmt.Errorf("mcp: %w", err))
	}
	return nil
}

// remoteMCP is mcp.Service through a dlqbot server; the caller is the
// token's principal, whatever the tools pass.
type remoteMCP struct{ rt *remote }

var _ mcp.Service = remoteMCP{}

func (m remoteMCP) Preview(ctx context.Context, _ api.Caller, selection string) (*engine.Preview, error) {
	return m.rt.c.Preview(ctx, selection)
}

func (m remoteMCP) Approve(ctx context.Context, _ api.Caller, token string, p api.Params, confirm string) (engine.Replay, error) {
	return m.rt.c.Approve(ctx, token, p, confirm)
}

// RequestApproval asks the server to post the preview in Slack for a
// person to approve (what dlq_replay does when the server refuses the
// token's principal an approval with needs_human).
func (m remoteMCP) RequestApproval(ctx context.Context, _ api.Caller, token string) (string, string, error) {
	out, err := m.rt.c.RequestApproval(ctx, token)
	return out.Channel, out.TS, err
}

func (m remoteMCP) Replay(ctx context.Context, _ api.Caller, id string) (engine.Replay, error) {
	return m.rt.c.Replay(ctx, id)
}

func (m remoteMCP) List(ctx context.Context, _ api.Caller, n int) ([]engine.Replay, int, error) {
	return m.rt.c.List(ctx, n)
}

func (m remoteMCP) Control(ctx context.Context, _ api.Caller, verb, id string) (engine.Replay, error) {
	action, ok := engine.ParseControlAction(verb)
	if !ok {
		return engine.Replay{}, &api.Error{Status: http.StatusBadRequest, Code: api.CodeBadRequest,
			Message: fmt.Sprintf("Unknown action %q; a replay can be paused, resumed or cancelled.", verb)}
	}
	return m.rt.c.Control(ctx, action, id)
}

func (m remoteMCP) Check(ctx context.Context, _ api.Caller, id string) (engine.CheckReport, error) {
	return m.rt.c.Check(ctx, id)
}

// NeedsHuman is the server's to decide: false here, so that dlq_replay
// asks the server to approve; when it refuses with needs_human, the tool
// asks it to post the preview for a person instead (RequestApproval).
func (remoteMCP) NeedsHuman(api.Caller) bool { return false }
