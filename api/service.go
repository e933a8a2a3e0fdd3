package api

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// Defaults for Config.
const (
	DefaultMaxBodyBytes = 64 << 10
	DefaultWorkTimeout  = 10 * time.Minute
	DefaultListSize     = ops.DefaultListSize
	DefaultMaxList      = ops.DefaultMaxList
	DefaultEventPoll    = 250 * time.Millisecond
	DefaultHeartbeat    = 15 * time.Second
)

// Config configures the API. Zero values mean the documented defaults.
type Config struct {
	// MaxBodyBytes caps a request body; default 64 KiB.
	MaxBodyBytes int64
	// WorkTimeout bounds one call's work (a preview scan, an approval);
	// default 10 minutes.
	WorkTimeout time.Duration
	// EventPoll is how often an event stream reads the replay's event log;
	// default 250ms.
	EventPoll time.Duration
	// Heartbeat is how often an idle event stream sends a comment so that
	// proxies keep it open; default 15s.
	Heartbeat time.Duration
}

func (c Config) withDefaults() Config {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.WorkTimeout <= 0 {
		c.WorkTimeout = DefaultWorkTimeout
	}
	if c.EventPoll <= 0 {
		c.EventPoll = DefaultEventPoll
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	return c
}

// Deps are the API's collaborators.
type Deps struct {
	// Ops are the operations, with the policy; required. The HTTP API
	// serves only when the policy is set (it names the principals); the
	// MCP stdio server may run without one, like the terminal.
	Ops *ops.Ops
	// Events is the replay event log the event stream reads; optional
	// (without it the stream endpoint answers 501).
	Events EventLog
	// Slack shows API-approved replays in Slack; optional.
	Slack Slack
	// AuditLog reads the trail for GET /api/v1/audit; optional (501
	// without). The operations record it (ops.Deps.Audit).
	AuditLog audit.Reader
	Log      zerolog.Logger
}

// Slack is the Slack front end, when one is wired in; *bot.Bot implements
// it.
type Slack interface {
	// ShowReplay shows a replay approved outside Slack: its progress
	// message in the preview's thread when the preview was posted in
	// Slack, else in a thread of its own in the API channel (when one is
	// configured), and records where.
	ShowReplay(ctx context.Context, r engine.Replay) error
}

// Service is the program front ends' translation of the operations (the
// HTTP API and the MCP tools): it takes their input as typed values,
// calls package ops, and words refusals as *Error (an HTTP status and a
// stable code). It is safe for concurrent use.
type Service struct {
	cfg      Config
	d        Deps
	ops      *ops.Ops
	log      zerolog.Logger
	previews *ops.PreviewCache[*engine.Preview]
}

// previewCacheSize is how many previews made here a Service remembers
// (see ops.PreviewCache), so that asking a person to approve one can post
// the whole preview.
const previewCacheSize = 500

// New validates cfg and deps and returns a Service.
func New(cfg Config, d Deps) (*Service, error) {
	if d.Ops == nil {
		return nil, errors.New("api: new: the operations are required")
	}
	return &Service{cfg: cfg.withDefaults(), d: d, ops: d.Ops, log: d.Log.With().Str("component", "api").Logger(), previews: ops.NewPreviewCache[*engine.Preview](previewCacheSize)}, nil
}

// Policy returns the permissions policy (nil when access control is off).
func (s *Service) Policy() *commands.Policy { return s.ops.Policy() }

// Caller is who makes a call (see ops.Caller).
type Caller = ops.Caller

// CallerOf returns the Caller a principal makes through front end via
// ("api" or "mcp").
func CallerOf(p commands.Principal, via string) Caller {
	return ops.PrincipalCaller(p, via)
}

// NeedsHuman reports whether c may not start or resume a replay itself
// (ops.Ops.NeedsHuman): MCP then asks a person in Slack.
func (s *Service) NeedsHuman(c Caller) bool { return s.ops.NeedsHuman(c) }
