package main

import (
	"context"
	"fmt"
	"io"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/mcp"
	"github.com/stroma/dlqbot/ops"
)

var (
	_ api.Slack = (*bot.Bot)(nil)
	_ ops.Asker = (*bot.Bot)(nil)
)

// newAPI builds the program front ends' translation of o, with b (nil
// without Slack) to show their replays in Slack.
func (a *app) newAPI(o *ops.Ops, b *bot.Bot) (*api.Service, error) {
	deps := api.Deps{Ops: o, Events: a.store.Events(), AuditLog: a.store.Audit(), Log: a.log}
	if b != nil {
		deps.Slack = b
	}
	return api.New(api.Config{}, deps)
}

// mountAPI serves the JSON HTTP API at /api/ and the MCP tools at /mcp.
// Both are off (404 with a sentence) without a permissions file.
func (r *replica) mountAPI(o *ops.Ops, b *bot.Bot) error {
	a := r.a
	if a.cfg.MCPRequireHuman && (b == nil || a.cfg.APIChannel == "") {
		return usageError("DLQBOT_MCP_REQUIRE_HUMAN needs Slack (SLACK_BOT_TOKEN) and DLQBOT_API_CHANNEL, where the previews are posted for approval")
	}
	svc, err := a.newAPI(o, b)
	if err != nil {
		return err
	}
	r.mux.Handle("/api/", svc.Handler())
	r.mux.Handle("/mcp", mcp.Handler(svc, mcp.Config{RequireHuman: a.cfg.MCPRequireHuman}, r.log))
	if err := r.mountDashboard(o, svc); err != nil {
		return err
	}
	principals := 0
	if p := o.Policy(); p != nil {
		principals = len(p.Principals)
	}
	r.log.Info().Bool("on", o.Policy() != nil).Int("principals", principals).Bool("mcp_require_human", a.cfg.MCPRequireHuman).
		Msg("http api and mcp endpoint")
	return nil
}

// mcpCommand runs `dlqbot mcp`: the MCP tools over stdio (stdout carries
// the protocol, logs go to stderr). With DLQBOT_SERVER every tool calls
// that server's HTTP API as the principal of DLQBOT_TOKEN (mcpClient).
// Otherwise, in the operator's direct mode: with a permissions file it
// acts as the principal whose token is DLQBOT_MCP_TOKEN; with
// DLQBOT_ACCESS=open, as "mcp:<os user>" with access control off. Replays
// it approves are run by the `dlqbot serve` workers.
func mcpCommand(ctx context.Context, cfg config, args []string, stderr io.Writer) error {
	err := mcpStdio(ctx, cfg, args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "dlqbot mcp:", err)
	}
	return err
}

func mcpStdio(ctx context.Context, cfg config, args []string, stderr io.Writer) error {
	if len(args) > 0 {
		return usageError("dlqbot mcp takes no arguments; it speaks MCP on stdin and stdout (set DLQBOT_MCP_TOKEN to act as a principal)")
	}
	if cfg.Server != "" {
		return mcpClient(ctx, cfg, stderr)
	}
	if err := checkDirect(cfg, "dlqbot mcp"); err != nil {
		return err
	}
	a, err := newApp(cfg, stderr, true)
	if err != nil {
		return err
	}
	defer a.Close()
	policy, err := a.loadPolicy()
	if err != nil {
		return err
	}
	var caller api.Caller
	if policy == nil {
		me, err := osUser()
		if err != nil {
			return err
		}
		caller = api.Caller{Identity: "mcp:" + me, FrontEnd: ops.FrontMCP}
	} else {
		p, ok := policy.Principal(cfg.MCPToken)
		if !ok {
			return usageError("DLQBOT_MCP_TOKEN must be the token of a principal in the permissions file (DLQBOT_PERMISSIONS): dlqbot mcp acts as that principal")
		}
		caller = api.CallerOf(p, "mcp")
	}
	var b *bot.Bot
	var n *bot.Notifier
	var groups commands.UserGroups
	if cfg.SlackBotToken != "" {
		if n, err = bot.NewNotifier(bot.Config{BotToken: cfg.SlackBotToken, APIURL: cfg.SlackAPIURL, ActivityChannel: cfg.ActivityChannel,
			APIChannel: cfg.APIChannel, WorkspaceURL: cfg.SlackWorkspaceURL, DashboardURL: cfg.DashboardURL}, bot.NotifierDeps{Replays: a.store.Replays(), Refs: a.store.SlackRefs(), Previews: a.store.Tokens(), Log: a.log}); err != nil {
			return usageError("slack: %w", err)
		}
		groups = n.UserGroups()
	}
	o, err := a.newOps(policy, groups)
	if err != nil {
		return err
	}
	if n != nil {
		b, err = bot.New(n, bot.Deps{Ops: o, Tokens: a.store.Tokens()})
		if err != nil {
			return usageError("slack: %w", err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = b.Shutdown(sctx)
		}()
	}
	if cfg.MCPRequireHuman && (b == nil || cfg.APIChannel == "") {
		return usageError("DLQBOT_MCP_REQUIRE_HUMAN needs Slack (SLACK_BOT_TOKEN) and DLQBOT_API_CHANNEL, where the previews are posted for approval")
	}
	if b != nil {
		o.SetAsker(b)
	}
	svc, err := a.newAPI(o, b)
	if err != nil {
		return err
	}
	a.log.Info().Str("as", caller.Identity).Bool("access_control", policy != nil).Bool("require_human", cfg.MCPRequireHuman).Msg("dlqbot mcp on stdio")
	if err := mcp.Serve(ctx, svc, mcp.Config{RequireHuman: cfg.MCPRequireHuman}, caller, &sdk.StdioTransport{}, a.log); err != nil && ctx.Err() == nil {
		return failed(fmt.Errorf("mcp: %w", err))
	}
	return nil
}
