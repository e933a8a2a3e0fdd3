package mcp

import (
	"context"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/engine"
)

// Service is what the tools call: *api.Service in `dlqbot serve` and the
// operator's direct `dlqbot mcp`, or a client of a dlqbot server's HTTP
// API when `dlqbot mcp` runs as one (DLQBOT_SERVER). Its methods are
// api.Service's; errors are *api.Error where the call was refused.
type Service interface {
	Preview(ctx context.Context, c api.Caller, selection string) (*engine.Preview, error)
	Approve(ctx context.Context, c api.Caller, token string, p api.Params, confirm string) (engine.Replay, error)
	RequestApproval(ctx context.Context, c api.Caller, token string) (channel, ts string, err error)
	Replay(ctx context.Context, c api.Caller, id string) (engine.Replay, error)
	List(ctx context.Context, c api.Caller, n int) ([]engine.Replay, int, error)
	Control(ctx context.Context, c api.Caller, verb, id string) (engine.Replay, error)
	Check(ctx context.Context, c api.Caller, id string) (engine.CheckReport, error)
	NeedsHuman(c api.Caller) bool
}

var _ Service = (*api.Service)(nil)
