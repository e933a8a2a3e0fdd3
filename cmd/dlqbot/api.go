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
)

var _ api.Slack = (*bot.Bot)(nil)

// newAPI builds the API's operations on a's engine and store, with b (nil
// without Slack) to show its replays in Slack.
func (a *app) newAPI(policy *commands.Policy, b *bot.Bot) (*api.Service, error) {
	deps := api.Deps{Engine: a.svc, Replays: a.store.Replays(), Tokens: a.store.Tokens(),
		Events: a.store.Events(), Log: a.log}
	if b != nil {
		deps.Slack, deps.Groups = b, b.UserGroups()
	}
	return api.New(api.Config{Policy: policy}, deps)
}

// mountAPI serves the JSON HTTP API at /api/ and the MCP tools at /mcp.
// Both are off (404 with a sentence) without a permissions file.
func (r *replica) mountAPI(b *bot.Bot) error {
	a := r.a
	policy, err := commands.LoadPolicy(a.cfg.PermissionsFile)
	if err != nil {
		return usageError("DLQBOT_PERMISSIONS: %w", err)
	}
	if a.cfg.MCPRequireHuman && (b == nil || a.cfg.APIChannel == "") {
		return usageError("DLQBOT_MCP_REQUIRE_HUMAN needs Slack (SLACK_BOT_TOKEN) and DLQBOT_API_CHANNEL, where the previews are posted for approval")
	}
	svc, err := a.newAPI(policy, b)
	if err != nil {
		return err
	}
	r.mux.Handle("/api/", svc.Handler())
	r.mux.Handle("/mcp", mcp.Handler(svc, mcp.Config{RequireHuman: a.cfg.MCPRequireHuman}, r.log))
	principals := 0
	if policy != nil {
		principals = len(policy.Principals)
	}
	r.log.Info().Bool("on", policy != nil).Int("principals", principals).Bool("mcp_require_human", a.cfg.MCPRequireHuman).
		Msg("http api and mcp endpoint")
	return nil
}

// mcpCommand runs `dlqbot mcp`: the MCP tools over stdio (stdout carries
// the protocol, logs go to stderr). With a permissions file it acts as the
// principal whose token is DLQBOT_MCP_TOKEN; without one, like the
// terminal, as "mcp:<os user>" with access control off. Replays it
// approves are run by the `dlqbot serve` workers.
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
	a, err := newApp(cfg, stderr, true)
	if err != nil {
		return err
	}
	defer a.Close()
	policy, err := commands.LoadPolicy(cfg.PermissionsFile)
	if err != nil {
		return usageError("DLQBOT_PERMISSIONS: %w", err)
	}
	caller := api.Caller{ID: "mcp:" + currentUser(), Via: "mcp"}
	if currentUser() == "" {
		caller.ID = "mcp"
	}
	if policy != nil {
		p, ok := policy.Principal(cfg.MCPToken)
		if !ok {
			return usageError("DLQBOT_MCP_TOKEN must be the token of a principal in the permissions file (DLQBOT_PERMISSIONS): dlqbot mcp acts as that principal")
		}
		caller = api.CallerOf(p, "mcp")
	}
	var b *bot.Bot
	if cfg.SlackBotToken != "" {
		n, err := bot.NewNotifier(bot.Config{BotToken: cfg.SlackBotToken, APIURL: cfg.SlackAPIURL, ActivityChannel: cfg.ActivityChannel,
			Policy: policy, APIChannel: cfg.APIChannel}, bot.NotifierDeps{Replays: a.store.Replays(), Refs: a.store.SlackRefs(), Log: a.log})
		if err != nil {
			return usageError("slack: %w", err)
		}
		b, err = bot.New(n, bot.Deps{Engine: a.svc, Replays: a.store.Replays(), Tokens: a.store.Tokens()})
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
	svc, err := a.newAPI(policy, b)
	if err != nil {
		return err
	}
	a.log.Info().Str("as", caller.ID).Bool("access_control", policy != nil).Bool("require_human", cfg.MCPRequireHuman).Msg("dlqbot mcp on stdio")
	if err := mcp.Serve(ctx, svc, mcp.Config{RequireHuman: cfg.MCPRequireHuman}, caller, &sdk.StdioTransport{}, a.log); err != nil && ctx.Err() == nil {
		return failed(fmt.Errorf("mcp: %w", err))
	}
	return nil
}
