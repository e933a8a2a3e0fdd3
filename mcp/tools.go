package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/engine"
)

// Config configures the MCP tools.
type Config struct {
	// RequireHuman words dlq_replay for callers that need a human
	// (DLQBOT_MCP_REQUIRE_HUMAN, which the operations layer applies to
	// every principal of the HTTP API and MCP). Whoever needs a human —
	// by this setting or by needs_human in the permissions file — gets
	// the preview posted to Slack for a person to approve instead of a
	// replay; the policy decides, not this flag.
	RequireHuman bool
	// Version is reported to clients; default "dev".
	Version string
}

// CallerFunc names who makes a tool call.
type CallerFunc func(req *sdk.CallToolRequest) (api.Caller, error)

// safety is the contract every description ends with.
const safety = " Safety: a preview reads the dead-letter queue without changing it; a replay can only start from the token of a preview, sends exactly the messages that preview froze (never messages dead-lettered later), in canary steps (10, 20, 40…) that stop by themselves when copies come back, and never acks a DLQ message before RabbitMQ confirmed its copy. Permissions are those of your principal."

// Tool inputs.
type (
	previewIn struct {
		Selection string `json:"selection" jsonschema:"the DLQ name followed by optional filters, in the /dlq preview grammar: orders.dlq reason=rejected source=orders since=2h exception=Timeout limit=100 to=orders.retry"`
	}
	replayIn struct {
		Token          string `json:"token" jsonschema:"the token returned by dlq_preview (p_…); a replay never takes a selection"`
		Step           *int   `json:"step,omitempty" jsonschema:"first canary step size, at least 1 (default 10)"`
		Cap            *int   `json:"cap,omitempty" jsonschema:"largest step, at least 1 (default 500)"`
		Rate           string `json:"rate,omitempty" jsonschema:"auto (the default: paced to the target's consumers), messages per second, or max (unpaced)"`
		Max            string `json:"max,omitempty" jsonschema:"the most rate auto sends, in messages per second (default 500)"`
		Timeout        string `json:"timeout,omitempty" jsonschema:"step settle timeout in Go syntax (default 60s)"`
		TakeOver       bool   `json:"take_over,omitempty" jsonschema:"send the previewed messages another running or paused replay owns from this replay instead (that replay then leaves them); default false: leave them to it"`
		ConfirmChanges string `json:"confirm_changes,omitempty" jsonschema:"the changes_digest of an earlier refusal: approve despite exactly those changes since the preview"`
	}
	replayIDIn struct {
		ReplayID string `json:"replay_id" jsonschema:"the replay id (r_…)"`
	}
	resumeIn struct {
		ReplayID string `json:"replay_id" jsonschema:"the replay id (r_…)"`
		Resend   string `json:"resend,omitempty" jsonschema:"in-doubt: first send again the copies a lost connection left in doubt (marked x-dlqbot-possible-duplicate); omit to send only the rest"`
	}
	statusIn struct {
		ReplayID string `json:"replay_id,omitempty" jsonschema:"the replay id (r_…); omit to list recent replays"`
	}
)

// waiting is dlq_replay's answer in human-approval mode.
type waiting struct {
	Status  string `json:"status"` // "waiting_for_approval"
	Token   string `json:"token"`
	Channel string `json:"channel"`
	TS      string `json:"ts"`
	Message string `json:"message"`
}

// NewServer returns an MCP server with dlqbot's tools, acting through svc
// for the caller who names each call.
func NewServer(svc Service, cfg Config, caller CallerFunc, log zerolog.Logger) *sdk.Server {
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	log = log.With().Str("component", "mcp").Logger()
	s := sdk.NewServer(&sdk.Implementation{Name: "dlqbot", Title: "dlqbot: safe RabbitMQ dead-letter replays", Version: cfg.Version},
		&sdk.ServerOptions{Instructions: "Preview a dead-letter queue with dlq_preview (changes nothing), then replay the preview's token with dlq_replay; follow it with dlq_status, stop it with dlq_pause or dlq_cancel, and ask whether it worked with dlq_check."})
	run := func(name string, req *sdk.CallToolRequest, fn func(c api.Caller) (any, error)) (*sdk.CallToolResult, any, error) {
		c, err := caller(req)
		if err == nil {
			var out any
			out, err = fn(c)
			ev := log.Info()
			if err != nil {
				// The agent is told the sentence; the log also has the cause.
				ae := api.ErrorOf(err, "")
				ev = log.Warn().Err(err)
				if ae.RequestID != "" {
					ev = ev.Str("request_id", ae.RequestID).Str("cause", ae.Cause())
				}
				err = ae
			}
			ev.Str("principal", c.Principal).Str("as", c.Identity).Str("tool", name).Msg("mcp call")
			if err == nil {
				return nil, out, nil
			}
		} else {
			log.Warn().Err(err).Str("tool", name).Msg("mcp call refused: no principal")
		}
		return nil, nil, toolError(err)
	}
	no := false
	yes := true
	sdk.AddTool(s, &sdk.Tool{Name: "dlq_preview", Title: "Preview a DLQ replay",
		Description: "Preview what replaying messages out of a RabbitMQ dead-letter queue would do: per target queue, whether it exists and has consumers, reasons, attempts, earlier replays, and what would go wrong first. Returns the whole preview with a token that freezes exactly the selected messages for 24 hours; pass that token to dlq_replay." + safety,
		Annotations: &sdk.ToolAnnotations{Title: "Preview a DLQ replay", ReadOnlyHint: true, OpenWorldHint: &no}},
		func(ctx context.Context, req *sdk.CallToolRequest, in previewIn) (*sdk.CallToolResult, any, error) {
			return run("dlq_preview", req, func(c api.Caller) (any, error) { return svc.Preview(ctx, c, in.Selection) })
		})
	replayDesc := "Approve a preview's token and start its canary replay; returns the replay (replay_id, state). If the DLQ or its targets changed since the preview, nothing is sent and the error lists the changes with a changes_digest: call again with confirm_changes set to it to approve anyway, or preview again. The four-eyes rule may forbid approving your own preview. When you may not start a replay yourself (you need a human), the preview is posted to Slack for a person to approve instead and the answer has status waiting_for_approval."
	if cfg.RequireHuman {
		replayDesc = "Ask a person to approve a preview's token: the preview is posted to Slack with an Approve button, and nothing is sent until someone clicks it. Returns status waiting_for_approval; follow the replay with dlq_status once approved."
	}
	sdk.AddTool(s, &sdk.Tool{Name: "dlq_replay", Title: "Replay a previewed DLQ selection",
		Description: replayDesc + " Takes a token from dlq_preview, never a selection." + safety,
		Annotations: &sdk.ToolAnnotations{Title: "Replay a previewed DLQ selection", DestructiveHint: &yes, OpenWorldHint: &no}},
		func(ctx context.Context, req *sdk.CallToolRequest, in replayIn) (*sdk.CallToolResult, any, error) {
			return run("dlq_replay", req, func(c api.Caller) (any, error) {
				if svc.NeedsHuman(c) {
					ch, ts, err := svc.RequestApproval(ctx, c, in.Token)
					if err != nil {
						return nil, err
					}
					return waiting{Status: "waiting_for_approval", Token: in.Token, Channel: ch, TS: ts,
						Message: "The preview was posted to Slack for a person to approve; nothing is sent until someone clicks Approve. Follow it with dlq_status."}, nil
				}
				r, err := svc.Approve(ctx, c, in.Token, api.Params{Step: in.Step, Cap: in.Cap, Rate: api.Rate(in.Rate), Max: api.Rate(in.Max), Timeout: in.Timeout, TakeOver: in.TakeOver}, in.ConfirmChanges)
				var ae *api.Error
				if errors.As(err, &ae) && ae.Code == api.CodeNeedsHuman {
					// Only a server can tell (svc a client of one): it
					// refused this caller an approval, so a person is
					// asked; when nobody can be asked, the refusal stands.
					ch, ts, rerr := svc.RequestApproval(ctx, c, in.Token)
					if rerr != nil {
						return nil, err
					}
					return waiting{Status: "waiting_for_approval", Token: in.Token, Channel: ch, TS: ts,
						Message: "The preview was posted to Slack for a person to approve; nothing is sent until someone clicks Approve. Follow it with dlq_status."}, nil
				}
				return r, err
			})
		})
	sdk.AddTool(s, &sdk.Tool{Name: "dlq_status", Title: "Replay status",
		Description: "Show a replay's state (queued, running, paused, stopped, cancelled, finished, interrupted), its verdict (clean, came_back, could_not_tell: only finished with clean is a success) and counts: sent, settled, came back (returned), missing, not delivered. Without replay_id, list recent replays. Changes nothing." + safety,
		Annotations: &sdk.ToolAnnotations{Title: "Replay status", ReadOnlyHint: true, OpenWorldHint: &no}},
		func(ctx context.Context, req *sdk.CallToolRequest, in statusIn) (*sdk.CallToolResult, any, error) {
			return run("dlq_status", req, func(c api.Caller) (any, error) {
				if in.ReplayID == "" {
					rs, hidden, err := svc.List(ctx, c, 0)
					return map[string]any{"replays": rs, "hidden": hidden}, err
				}
				return svc.Replay(ctx, c, in.ReplayID)
			})
		})
	sdk.AddTool(s, &sdk.Tool{Name: "dlq_pause", Title: "Pause a replay",
		Description: "Pause a running replay within a second; messages not yet sent stay in the DLQ untouched. dlq_resume resumes it (refused to a caller that needs a human)." + safety,
		Annotations: &sdk.ToolAnnotations{Title: "Pause a replay", DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no}},
		func(ctx context.Context, req *sdk.CallToolRequest, in replayIDIn) (*sdk.CallToolResult, any, error) {
			return run("dlq_pause", req, func(c api.Caller) (any, error) { return svc.Control(ctx, c, "pause", in.ReplayID) })
		})
	sdk.AddTool(s, &sdk.Tool{Name: "dlq_resume", Title: "Resume a replay",
		Description: "Resume a paused or stopped replay: it sends the rest of what was approved, in its steps, and stops by itself again if copies come back. With resend \"in-doubt\" it first sends again, at least once, the copies a lost connection left in doubt, each with its message_id, the same x-dlqbot-copy and the header x-dlqbot-possible-duplicate: true, so consumers can drop a second one. A principal that needs a human is refused." + safety,
		Annotations: &sdk.ToolAnnotations{Title: "Resume a replay", DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no}},
		func(ctx context.Context, req *sdk.CallToolRequest, in resumeIn) (*sdk.CallToolResult, any, error) {
			return run("dlq_resume", req, func(c api.Caller) (any, error) {
				action, err := engine.ControlResume.WithResend(in.Resend)
				if err != nil {
					return nil, &api.Error{Status: http.StatusBadRequest, Code: api.CodeBadRequest, Message: err.Error() + ". Nothing was done."}
				}
				return svc.Control(ctx, c, string(action), in.ReplayID)
			})
		})
	sdk.AddTool(s, &sdk.Tool{Name: "dlq_cancel", Title: "Cancel a replay",
		Description: "Cancel a replay within a second; messages not yet sent stay in the DLQ untouched, and a cancelled replay cannot be resumed. A caller that needs a human is refused (dlq_pause is the brake it may pull)." + safety,
		Annotations: &sdk.ToolAnnotations{Title: "Cancel a replay", DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no}},
		func(ctx context.Context, req *sdk.CallToolRequest, in replayIDIn) (*sdk.CallToolResult, any, error) {
			return run("dlq_cancel", req, func(c api.Caller) (any, error) { return svc.Control(ctx, c, "cancel", in.ReplayID) })
		})
	sdk.AddTool(s, &sdk.Tool{Name: "dlq_check", Title: "Did the replay work?",
		Description: "Check a replay: how many of its copies came back to the DLQ (with a new death), grouped by exception or reason, new failures since the replay began, and messages at the park limit. Messages not back are 'not seen in a dead-letter queue', never 'processed'. When the DLQ's tap was gone for a while and the DLQ could not be re-read, 'unseen' {count, from, to} names the copies it could not tell about: then 'returned' counts only what was seen. Reads the DLQ without changing it." + safety,
		Annotations: &sdk.ToolAnnotations{Title: "Did the replay work?", ReadOnlyHint: true, OpenWorldHint: &no}},
		func(ctx context.Context, req *sdk.CallToolRequest, in replayIDIn) (*sdk.CallToolResult, any, error) {
			return run("dlq_check", req, func(c api.Caller) (any, error) { return svc.Check(ctx, c, in.ReplayID) })
		})
	return s
}

// toolError words an error for the agent: "[code] sentence", with the
// changes and their digest when the world changed since the preview.
func toolError(err error) error {
	var ae *api.Error
	if !errors.As(err, &ae) {
		return err
	}
	msg := fmt.Sprintf("[%s] %s", ae.Code, ae.Message)
	if ae.ChangesDigest != "" {
		msg += " changes_digest: " + ae.ChangesDigest
	}
	return errors.New(msg)
}
